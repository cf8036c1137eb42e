//! A whole GitOps fleet in one process: the simulated clusters and cloud of a fleet repo,
//! and per cluster a rotation controller and an agent following the repo (each with its own
//! bare mirror, statuses in git notes pushed back to the repo). What `rota demo` and the
//! end-to-end tests run; every agent is assembled by [`super::wiring`], exactly as `rota
//! agent` assembles it, only the clusters and their cloud are simulated.
//!
//! Built with the `sim` Cargo feature only (on by default; the image leaves it out).
#![cfg(feature = "sim")]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::wiring::{self, AgentParts};
use super::{AgentConfig, Snapshot};
use crate::controller::Config;
use crate::controller::clock::Clock;
use crate::forge::StoreConfig;
use crate::source::follow::FollowConfig;
use crate::source::trust::{TrustPolicy, Verifier};
use crate::source::webhook::WebhookConfig;
use crate::source::{Auth, SourceConfig};
use rota_sim::faults::FaultProfile;
use rota_sim::scenario::{Scenario, WorkloadProfile};
use rota_sim::world::Fleet;

/// How to build the local fleet.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// The fleet repo (a local working repo or bare repo, branch `branch`).
    pub repo: PathBuf,
    pub branch: String,
    /// Where the agents keep their mirrors.
    pub state_dir: PathBuf,
    pub workloads: WorkloadProfile,
    /// Simulation and controller speed (1.0 = real time).
    pub speed: f64,
    /// How often each agent fetches (webhooks are not used in process).
    pub poll: Duration,
    pub resync: Duration,
    pub trust: Option<TrustPolicy>,
    /// Each agent also receives push webhooks on a loopback port (see `LocalFleet::webhooks`).
    pub webhook: Option<WebhookConfig>,
    /// Where statuses go (default: git notes); promotion records stay in git notes.
    pub statuses: Option<StoreConfig>,
    /// How the agents report to a forge (`--status-contexts`, the page, the budget).
    pub report: super::reporting::ReportConfig,
    /// The fleet time the clock reads at the start (every controller's, agent's and
    /// cluster's); `None`: the wall time. The demo fixes it, so that its story meets the
    /// same maintenance windows whenever it runs.
    pub start: Option<chrono::DateTime<chrono::Utc>>,
}

impl LocalConfig {
    /// The fleet repo `repo` (branch `main`) in real time, polled every 10 s with a 5 s
    /// resync, statuses in git notes, no trust policy and no webhook: set what differs.
    pub fn new(repo: PathBuf, state_dir: PathBuf, workloads: WorkloadProfile) -> LocalConfig {
        LocalConfig {
            repo,
            branch: "main".into(),
            state_dir,
            workloads,
            speed: 1.0,
            poll: Duration::from_secs(10),
            resync: Duration::from_secs(5),
            trust: None,
            webhook: None,
            statuses: None,
            report: Default::default(),
            start: None,
        }
    }
}

/// A running local fleet; everything stops when dropped.
pub struct LocalFleet {
    pub sim: Fleet,
    /// One client per cluster (the in-process API server).
    pub clients: BTreeMap<String, kube::Client>,
    /// What each agent did last.
    pub agents: BTreeMap<String, watch::Receiver<Snapshot>>,
    /// The shared clock: controllers and guards agree on time.
    pub clock: Clock,
    /// How far the clock is off the wall (`LocalConfig::start`), given to every controller.
    skew: chrono::Duration,
    /// Where each agent's webhook receiver listens (with `LocalConfig::webhook`).
    pub webhooks: BTreeMap<String, std::net::SocketAddr>,
    cancel: CancellationToken,
    config: LocalConfig,
    verifier: Option<Arc<Verifier>>,
    /// Each cluster's running agent, with the token that stops its fetch loop.
    running: BTreeMap<String, (super::wiring::RunningAgent, CancellationToken)>,
}

impl Drop for LocalFleet {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// The simulated clouds behind the registry `rota agent` uses: each cloud's self-managed
/// groups, and a managed pool refused as a real agent refuses it (its owner's API is the only
/// way to it), so that what the local fleet reads of a managed pool is what a real agent can.
fn self_managed(cloud: &rota_sim::cloud::SimCloud) -> Arc<dyn crate::cloud::NodeGroups> {
    use crate::cloud::registry::Providers;
    let mut providers = Providers::new();
    for c in [
        crate::cloud::Cloud::Aws,
        crate::cloud::Cloud::Gcp,
        crate::cloud::Cloud::Azure,
    ] {
        let sim = cloud.clone();
        providers = providers.with(
            c,
            Box::new(move || {
                let s: Arc<dyn crate::cloud::NodeGroups> = Arc::new(sim.clone());
                Box::pin(async move { Ok(s) })
            }),
        );
    }
    Arc::new(providers)
}

impl LocalFleet {
    /// Loads the fleet at the branch's head, starts the simulated fleet on it (every pool on
    /// the image its wave pins) and one controller + agent per cluster.
    pub async fn start(config: LocalConfig) -> Result<LocalFleet, String> {
        let rev = format!("refs/heads/{}", config.branch);
        let fleet = crate::source::read::load_git(&config.repo, &rev).map_err(|d| d.to_string())?;
        let clusters = fleet.resolve_all().map_err(|e| e.to_string())?;
        let scenario = Scenario::from_fleet(
            &clusters,
            config.workloads.clone(),
            FaultProfile::default(),
            1,
        );
        let sim = Fleet::start(&scenario, config.speed)
            .await
            .map_err(|e| e.to_string())?;
        // The clouds hold the images the repo names, where it says they exist, and nothing
        // else: an AMI pinned for a region it was not published in fails there.
        for image in rota_sim::images::images_of(&fleet) {
            sim.cloud.publish_image(image);
        }
        for (region, name, value) in rota_sim::images::parameters_of(&fleet) {
            sim.cloud.set_parameter(&region, &name, &value);
        }
        sim.cloud.require_published_images(true);
        // A fixed start puts every clock of the fleet off the wall by the same amount: the
        // controllers get it as their clock's skew.
        let clock = Clock::new(config.speed);
        let skew = config
            .start
            .map_or_else(chrono::Duration::zero, |t| t - clock.now());
        let clock = clock.skewed(skew);
        // The clusters count their time (the Events their kubelets stamp) from the clock the
        // controllers read, not from when their stores were made.
        let (wall, at) = clock.anchor();
        for store in sim.clusters.values() {
            store.timekeeping().anchor_at(wall, at);
        }
        let cancel = CancellationToken::new();
        let verifier = match &config.trust {
            Some(p) => Some(Arc::new(Verifier::new(p).map_err(|e| e.to_string())?)),
            None => None,
        };
        let mut local = LocalFleet {
            sim,
            clients: BTreeMap::new(),
            agents: BTreeMap::new(),
            clock,
            skew,
            webhooks: BTreeMap::new(),
            cancel,
            config,
            verifier,
            running: BTreeMap::new(),
        };
        for c in &clusters {
            let store = local
                .sim
                .store(&c.name)
                .ok_or("cluster missing from the sim")?
                .clone();
            let client = crate::kube::sim::client(store);
            // The CRD is installed as an administrator would have installed it.
            super::install_crd(&client)
                .await
                .map_err(|e| e.to_string())?;
            local.clients.insert(c.name.clone(), client);
            let state_dir = local.config.state_dir.clone();
            local.start_agent(&c.name, &state_dir).await?;
        }
        Ok(local)
    }

    /// Starts the controller and agent of `cluster`, keeping their state under `state_dir`.
    async fn start_agent(
        &mut self,
        cluster: &str,
        state_dir: &std::path::Path,
    ) -> Result<(), String> {
        let config = &self.config;
        let client = self.clients[cluster].clone();
        let mut cc = Config::new(env!("CARGO_PKG_VERSION"), &format!("rota-{cluster}"));
        cc.speed = config.speed;
        cc.clock_skew = self.skew;
        cc.events = false;
        let mut ac = AgentConfig::new(cluster);
        ac.resync = config.resync;
        ac.report = config.report.clone();
        let cancel = self.cancel.child_token();
        let running = wiring::start(
            AgentParts {
                agent: ac,
                controller: cc,
                client,
                groups: self_managed(&self.sim.cloud),
                // The simulated fleet serves EKS node groups, GKE node pools and AKS agent
                // pools.
                owners: self.sim.cloud.owners(),
                source: SourceConfig {
                    url: config.repo.display().to_string(),
                    branch: config.branch.clone(),
                    auth: Auth::None,
                    depth: None,
                },
                state_dir: state_dir.to_path_buf(),
                follow: FollowConfig {
                    interval: config.poll,
                    webhook: config
                        .webhook
                        .clone()
                        .map(|w| (std::net::SocketAddr::from(([127, 0, 0, 1], 0)), w)),
                    watch_dir: None,
                },
                fetch_limits: Default::default(),
                evidence: Default::default(),
                verifier: self.verifier.clone(),
                statuses: config.statuses.clone(),
                metrics: crate::metrics::Metrics::for_cluster(cluster),
                clock: Some(self.clock),
            },
            cancel.clone(),
        )
        .await
        .map_err(|e| e.to_string())?;
        if let Some(addr) = running.webhook_addr() {
            self.webhooks.insert(cluster.to_string(), addr);
        }
        self.agents
            .insert(cluster.to_string(), running.snapshot.clone());
        self.running.insert(cluster.to_string(), (running, cancel));
        Ok(())
    }

    /// Kills `cluster`'s agent and controller at whatever await they are in (nothing
    /// released, nothing flushed) and starts new ones on a fresh state folder `state_dir`,
    /// as a pod rescheduled onto another node: its mirror starts empty and the Lease of the
    /// killed one has to run out first.
    pub async fn crash_and_restart(
        &mut self,
        cluster: &str,
        state_dir: &std::path::Path,
    ) -> Result<(), String> {
        if let Some((running, cancel)) = self.running.remove(cluster) {
            running.kill();
            cancel.cancel();
        }
        self.start_agent(cluster, state_dir).await
    }

    /// Kills `cluster`'s agent and controller and starts none in their place: a cluster
    /// whose agent is down.
    pub fn kill_agent(&mut self, cluster: &str) {
        if let Some((running, cancel)) = self.running.remove(cluster) {
            running.kill();
            cancel.cancel();
        }
        self.agents.remove(cluster);
    }

    /// Stops every agent as a clean shutdown does (each writes its ledger's last pass, then
    /// its controller gives the Lease up) and waits for them.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        for (_, (running, _)) in std::mem::take(&mut self.running) {
            running.join().await;
        }
    }

    /// Fetch now in every agent (after a commit, instead of waiting for the poll).
    pub fn poke(&self) {
        for (a, _) in self.running.values() {
            a.follower.trigger.fire();
        }
    }
}
