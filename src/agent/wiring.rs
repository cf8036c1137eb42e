//! The one place the agent of a cluster is assembled: git source and its follower, rotation
//! controller, status store (metered), fetch metrics and the agent loop. `rota agent` builds
//! an [`AgentParts`] from its flags and the demo's fleet (`agent::local`) from its simulated
//! clusters; both start it here, so that what the demo runs is what ships.
//!
//! Knows nothing of the simulated fleet: the caller hands over a Kubernetes client and the
//! cloud's `NodeGroups`, whatever serves them.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Agent, AgentConfig, Snapshot};
use crate::cloud::NodeGroups;
use crate::controller::clock::Clock;
use crate::controller::{Config, Controller};
use crate::forge::{StoreConfig, store_from_config};
use crate::metrics::{Metrics, Outcome};
use crate::report::metered::MeteredStore;
use crate::report::{GitNotesStore, StatusStore};
use crate::source::follow::{FollowConfig, Follower, follow};
use crate::source::poll::SourceState;
use crate::source::trust::Verifier;
use crate::source::{GitSource, SourceConfig};

/// Everything one cluster's agent is made of, decided by the caller.
pub struct AgentParts {
    /// The agent loop's settings (its `cluster` names the mirror, the notes ref, the metrics).
    pub agent: AgentConfig,
    /// The rotation controller's settings (version, identity, lease, speed, events).
    pub controller: Config,
    /// The cluster's Kubernetes API.
    pub client: kube::Client,
    /// The cloud groups of its pools.
    pub groups: Arc<dyn NodeGroups>,
    /// The owners' APIs of its managed pools, one adapter per owner this agent drives (the
    /// simulated fleet's EKS, GKE and AKS); a managed pool whose owner is not among them is
    /// reported, never acted on.
    pub owners: Vec<Arc<dyn rota_core::cloud::managed::OwnerPools>>,
    /// The fleet repo to follow.
    pub source: SourceConfig,
    /// Where the bare mirror of the fleet repo is kept (see [`mirror_dir`]).
    pub state_dir: PathBuf,
    /// Poll interval, webhook receiver, watched working copy.
    pub follow: FollowConfig,
    /// Caps on what one fetch may bring in (pack bytes, notes refs).
    pub fetch_limits: crate::source::FetchLimits,
    /// This agent's records signing key and the agents' allowed signers (see
    /// [`crate::report::evidence`]).
    pub evidence: crate::report::evidence::EvidenceKeys,
    /// Only commits this verifier admits are acted on.
    pub verifier: Option<Arc<Verifier>>,
    /// Where statuses go (`None`: git notes); promotion records stay in git notes.
    pub statuses: Option<StoreConfig>,
    /// The registry the controller, the store, the fetches and the agent record into.
    pub metrics: Metrics,
    /// The clock the agent's promotion guard reads (`None`: the controller's). A fleet in
    /// one process passes one clock to all its agents, so that they agree on soaks.
    pub clock: Option<Clock>,
}

/// Why an agent could not be started.
#[derive(Debug, thiserror::Error)]
pub enum WiringError {
    #[error("{}: {source}", dir.display())]
    StateDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("fleet repo: {0}")]
    Source(#[from] crate::source::SourceError),
    #[error("following the fleet repo: {0}")]
    Follow(#[from] crate::source::follow::FollowError),
    #[error("status store: {0}")]
    Store(#[from] crate::report::ReportError),
    #[error(
        "--repo {}: a working copy (not a bare repository): the agent pushes its git notes \
         (statuses and promotion records) to the repo it follows, which git refuses for a \
         working copy; follow a bare repository (`git clone --bare {} fleet.git`, or the \
         working copy's remote), and commit in the working copy then push", .0.display(), .0.display()
    )]
    WorkingCopy(PathBuf),
    #[error(
        "the NodePoolRotation CRD is not installed in this cluster: install it with \
         `rota crd | kubectl apply -f -` (it is in deploy/crd.yaml), or start the agent with \
         --install-crd (its RBAC must then allow writing CustomResourceDefinitions)"
    )]
    CrdMissing,
    #[error("installing the NodePoolRotation CRD (--install-crd): {0}")]
    CrdInstall(kube::Error),
    #[error("checking for the NodePoolRotation CRD: {0}")]
    CrdCheck(kube::Error),
}

/// A started agent; it runs until the cancellation token given to [`start`] fires.
pub struct RunningAgent {
    /// What the agent did last.
    pub snapshot: watch::Receiver<Snapshot>,
    /// The fetch loop (its `trigger` fetches at once; `webhook_addr` is where webhooks land).
    pub follower: Follower,
    /// The clock the agent's guard reads.
    pub clock: Clock,
    /// Where the bare mirror is.
    pub mirror: PathBuf,
    tasks: Vec<(&'static str, JoinHandle<()>)>,
}

impl RunningAgent {
    /// Where the webhook receiver listens, if it does.
    pub fn webhook_addr(&self) -> Option<SocketAddr> {
        self.follower.webhook_addr
    }

    /// Runs until `stop`, or until one of the agent's tasks ends on its own or panics (an
    /// error: the process should exit and be restarted, never linger with green probes).
    pub async fn supervise(
        &mut self,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<(), super::supervise::TaskEnded> {
        super::supervise::until_stop_or_end(stop, &mut self.tasks).await
    }

    /// Ends every task of the agent at whatever await it is in, as a killed process would:
    /// nothing is released (its Lease runs out on its own), nothing is flushed.
    pub fn kill(self) {
        for (_, t) in &self.tasks {
            t.abort();
        }
    }

    /// Waits for the agent loop and the controller to return (after the cancellation), the
    /// controller having given its Lease up.
    pub async fn join(self) {
        for (_, t) in self.tasks {
            let _ = t.await;
        }
        drop(self.follower);
    }
}

/// The bare mirror of the fleet repo for `cluster` under `state_dir`.
pub fn mirror_dir(state_dir: &Path, cluster: &str) -> PathBuf {
    state_dir.join(format!("fleet-{cluster}.git"))
}

/// Opens the mirror, starts following the repo, the controller and the agent loop.
pub async fn start(
    parts: AgentParts,
    cancel: CancellationToken,
) -> Result<RunningAgent, WiringError> {
    let AgentParts {
        agent: ac,
        controller: cc,
        client,
        groups,
        owners,
        source,
        state_dir,
        follow: fc,
        fetch_limits,
        evidence,
        verifier,
        statuses,
        metrics,
        clock,
    } = parts;
    std::fs::create_dir_all(&state_dir).map_err(|source| WiringError::StateDir {
        dir: state_dir.clone(),
        source,
    })?;
    refuse_working_copy(&source.url)?;
    check_crd(&client, ac.install_crd).await?;
    let mirror = mirror_dir(&state_dir, &ac.cluster);
    let source = Arc::new(GitSource::open(source, &mirror)?.with_limits(fetch_limits));
    // Before the first poll: an agent fetches its own notes and, while its guard waits,
    // the notes of the clusters it waits on (`Agent::sync`), never the whole fleet's.
    source.set_notes_clusters([ac.cluster.clone()]);
    let follower = follow(Arc::clone(&source), fc, cancel.clone()).await?;
    let mut controller =
        Controller::with_metrics(client.clone(), Arc::clone(&groups), cc, metrics.clone());
    let mut adopting = crate::controller::owners::Owners::default();
    for owner in owners {
        adopting.add(Arc::clone(&owner));
        controller = controller.with_owners(owner);
    }
    let clock = clock.unwrap_or_else(|| controller.clock());
    let notes = Arc::new(GitNotesStore::for_source(&source, &ac.cluster).with_evidence(&evidence));
    let ledger = ledger_for(
        &ac,
        &source,
        &client,
        &controller,
        &groups,
        &evidence,
        clock,
    );
    let store = status_store(&ac, statuses.as_ref(), &notes, &metrics)?;
    let polls_source = Arc::clone(&source);
    let mut agent = Agent::new(
        ac,
        source,
        client,
        Arc::clone(&notes),
        store,
        verifier,
        clock,
    );
    agent.set_metrics(metrics.clone());
    agent.set_groups(groups);
    agent.set_owners(adopting);
    // Rollout notices of the fleet repo's `spec.notifications` go out through the
    // controller of the cluster.
    agent.set_notifier(controller.notifier());
    // One writer per cluster: the agent writes only while its controller holds the Lease.
    agent.set_leadership(controller.leadership());
    let snapshot = agent.subscribe();
    let fetch_metrics = record_fetches(follower.state.clone(), polls_source, metrics);
    let tasks = spawn_tasks(
        fetch_metrics,
        agent.run(follower.state.clone(), cancel.clone()),
        ledger,
        controller,
        cancel,
    );
    Ok(RunningAgent {
        snapshot,
        follower,
        clock,
        mirror,
        tasks,
    })
}

/// Whether the NodePoolRotation CRD is there (or installed, with `--install-crd`). Only a
/// definite answer stops the start: an API server that cannot be reached now is retried by
/// every pass, as any other Kubernetes error.
async fn check_crd(client: &kube::Client, install: bool) -> Result<(), WiringError> {
    if install {
        if let Err(e) = super::install_crd(client).await {
            tracing::warn!(error = %WiringError::CrdInstall(e), "continuing without it");
        }
        return Ok(());
    }
    match super::crd_installed(client).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(WiringError::CrdMissing),
        Err(e) => {
            tracing::warn!(error = %WiringError::CrdCheck(e), "continuing");
            Ok(())
        }
    }
}

/// The image ledger of the cluster: written beside the notes, pushed where they go, by the
/// same single writer (the Lease holder).
fn ledger_for(
    ac: &AgentConfig,
    source: &GitSource,
    client: &kube::Client,
    controller: &Controller,
    groups: &Arc<dyn NodeGroups>,
    evidence: &crate::report::evidence::EvidenceKeys,
    clock: Clock,
) -> crate::ledger::recorder::Recorder {
    crate::ledger::recorder::Recorder {
        cluster: ac.cluster.clone(),
        client: client.clone(),
        index: Arc::clone(controller.index()),
        groups: Arc::clone(groups),
        repo: source.mirror_path().to_path_buf(),
        push: Some(crate::report::notes::PushTarget {
            url: source.config().url.clone(),
            auth: source.config().auth.clone(),
            known_hosts: source.known_hosts().cloned(),
        }),
        signing_key: evidence.signing_key.clone(),
        leadership: Some(controller.leadership()),
        clock,
        interval: ac.resync,
        departures: Some(controller.departures()),
    }
}

/// Where the pass's statuses go: a forge (within its request budget) or the git notes, each
/// metered.
fn status_store(
    ac: &AgentConfig,
    statuses: Option<&StoreConfig>,
    notes: &Arc<GitNotesStore>,
    metrics: &Metrics,
) -> Result<Arc<MeteredStore>, WiringError> {
    let store: Arc<dyn StatusStore> = match statuses {
        Some(sc) => {
            let forge = store_from_config(sc, Arc::clone(notes))?;
            let budget = ac
                .report
                .budget
                .or_else(|| super::reporting::default_budget(forge.backend()));
            if let Some(b) = budget {
                // Posts are counted under the budget, so its catch-ups count too.
                let forge = Arc::new(MeteredStore::posts(forge, metrics.clone()));
                let budgeted = crate::report::budget::BudgetedStore::new(forge, b);
                return Ok(Arc::new(MeteredStore::deferrals(
                    Arc::new(budgeted),
                    metrics.clone(),
                )));
            }
            forge
        }
        None => Arc::clone(notes) as Arc<dyn StatusStore>,
    };
    Ok(Arc::new(MeteredStore::new(store, metrics.clone())))
}

/// The agent's tasks, each named for the supervisor. On a clean shutdown the ledger writes
/// its last pass first, while the controller still holds the Lease; the controller stops (and
/// gives the Lease up) once it has.
fn spawn_tasks(
    fetch_metrics: impl std::future::Future<Output = ()> + Send + 'static,
    agent: impl std::future::Future<Output = ()> + Send + 'static,
    ledger: crate::ledger::recorder::Recorder,
    mut controller: Controller,
    cancel: CancellationToken,
) -> Vec<(&'static str, JoinHandle<()>)> {
    let ledger_done = CancellationToken::new();
    let controller_stop = ledger_done.clone();
    vec![
        ("fetch metrics", tokio::spawn(fetch_metrics)),
        ("agent", tokio::spawn(agent)),
        (
            "ledger",
            tokio::spawn(async move {
                // Dropped at the end, or when the ledger task panics or is aborted.
                let _stop_controller = ledger_done.drop_guard();
                ledger.run(cancel).await;
            }),
        ),
        (
            "controller",
            tokio::spawn(async move { controller.run(controller_stop.cancelled_owned()).await }),
        ),
    ]
}

/// A local repo (a path or `file://`) with a working tree cannot take the agent's pushes
/// (libgit2's local transport refuses to push to a non-bare repository): refused at start,
/// rather than failing every pass. Remote URLs and paths that are not repositories (yet)
/// are left to the fetch.
pub fn refuse_working_copy(url: &str) -> Result<(), WiringError> {
    let normal = crate::source::normalise_url(url);
    let Some(path) = normal.strip_prefix("file://") else {
        return Ok(());
    };
    match git2::Repository::open(path) {
        Ok(repo) if !repo.is_bare() => Err(WiringError::WorkingCopy(PathBuf::from(path))),
        _ => Ok(()),
    }
}

/// `rota_git_fetches_total{outcome}` and the last good fetch, from the poll loop's state, and
/// `rota_git_polls_total{answered_by}` from the source's counts (the guard's notes fetches
/// between polls count there too).
async fn record_fetches(
    mut state: watch::Receiver<SourceState>,
    source: Arc<GitSource>,
    metrics: Metrics,
) {
    let mut seen = 0;
    let mut polls = crate::source::PollCounts::default();
    loop {
        {
            let s = state.borrow_and_update();
            if s.fetches > seen {
                seen = s.fetches;
                let outcome = if s.last_error.is_none() {
                    Outcome::Ok
                } else {
                    Outcome::Error
                };
                metrics.record_git_fetch(outcome, chrono::Utc::now());
                let now = source.poll_counts();
                metrics.record_git_polls(
                    now.by_probe - polls.by_probe,
                    now.by_libgit2 - polls.by_libgit2,
                );
                polls = now;
            }
        }
        if state.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("git is installed (apt-get install git)")
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn a_local_working_copy_is_refused_a_bare_repo_or_remote_url_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().join("work");
        let bare = tmp.path().join("fleet.git");
        std::fs::create_dir_all(&work).unwrap();
        git(&work, &["init", "-q"]);
        git(tmp.path(), &["init", "-q", "--bare", "fleet.git"]);
        let e = refuse_working_copy(work.to_str().unwrap()).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("a working copy (not a bare repository)"),
            "{text}"
        );
        assert!(text.contains("git clone --bare"), "{text}");
        let file_url = format!("file://{}", work.display());
        assert!(refuse_working_copy(&file_url).is_err());
        refuse_working_copy(bare.to_str().unwrap()).unwrap();
        refuse_working_copy("ssh://git@example.com/acme/fleet.git").unwrap();
        refuse_working_copy("https://example.com/acme/fleet.git").unwrap();
        // Not a repository (yet): the fetch reports it.
        refuse_working_copy(tmp.path().join("missing").to_str().unwrap()).unwrap();
    }
}
