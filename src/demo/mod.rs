//! `rota demo`: the GitOps story on a simulated fleet, with real git commits.
//!
//! The fleet of `examples/fleet-repo` (7 clusters, 13 pools, 3 waves; the demo adds an EKS
//! managed node group to prod-use1) becomes a git repo (a bare origin and a work clone, in a
//! temporary folder or `--keep DIR`), a simulated fleet
//! ([`crate::agent::local::LocalFleet`]: per cluster a simulated API server, the rotation
//! controller and an agent following the origin, statuses in git notes), and the story is
//! played with the `git` command, as people would:
//!
//! 1. every wave starts on `general 2026.11.1`, already running on every node: the agents
//!    adopt each pool on its pins, with the promotion guard on;
//! 2. (a) a commit bumps the canary wave to `2026.11.2`: its pools roll, batch by batch;
//! 3. (b) a branch moving wave `early`'s pin is merged (a merge commit) right away: the
//!    promotion guard holds the wave until the canary has soaked (2h), then it rolls, its
//!    EKS managed node group prod-use1/system through EKS's own update ([`managed`]);
//! 4. (c) the clouds publish `2026.11.3`; `rota images discover --write` proposes it on the
//!    canary wave; midway, `git revert`: the pools roll back;
//! 5. (d) the demo fails once ([`failure`]): a bad build `2026.11.4` fails the `pods-healthy`
//!    gate; canary-use1/general rolls back by itself, dev-usc1/general pauses; a person's
//!    `rota ctl retry` fails again; `rota propose` writes the revert, a person merges it, and
//!    every signal ends with no stop.
//!
//! It ends with `git log --graph` and every commit's statuses, read from the status store.
//!
//! **Time.** The example's policy is kept as written (batch soaks of 5-10 minutes, pool soak
//! 15m, canary soak 2h, maintenance windows), so the story spans hours of fleet time. With the
//! default pace ([`Pace::Jump`]) the whole fleet runs on tokio's paused clock: nothing waits in
//! real time, and whenever every task is idle (waiting only on timers: a soak, a node boot,
//! the next poll) the clock jumps to the next timer. Every controller, agent and guard reads
//! that one [`crate::controller::clock::Clock`], so soaks are honoured in fleet time and the
//! times in statuses and records are consistent. [`Pace::Speed`] runs in real time instead,
//! that many times faster (for watching with kubectl at a human pace).
//!
//! Built with the `sim` Cargo feature only (on by default; the image leaves it out).
#![cfg(feature = "sim")]

pub mod failure;
pub mod managed;
mod options;
pub mod prometheus;
pub mod repo;
mod story;
pub mod view;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::agent::local::{LocalConfig, LocalFleet};
use crate::agent::progress::{DEFERRED, WINDOW_WAIT};
use crate::kube::crd::NodePoolRotation;
use crate::report::{CommitStatus, GitNotesStore, State};
use failure::{Build, GOOD_BUILD};
pub use options::{DemoOptions, Pace};
use repo::DemoRepo;
use rota_sim::scenario::WorkloadProfile;
pub use story::PoolEnd;
use story::{Story, blocking};
use view::ClusterView;

/// What the story did, for the caller (and the tests).
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The story's commits by step name (`initial`, `prometheus`, `bump`, `promotion-branch`,
    /// `merge`, `bump-again`, `revert`, `bad-image`, `revert-merged`).
    pub commits: BTreeMap<String, String>,
    /// Every commit's statuses (all clusters), from the git notes on the origin.
    pub statuses: BTreeMap<String, Vec<CommitStatus>>,
    /// `cluster/pool` → where its NodePoolRotation ended.
    pub pools: BTreeMap<String, PoolEnd>,
    /// Descriptions of canary pools seen on the revert commit (the rollback as it happened).
    pub revert_progress: Vec<String>,
    /// What the promotion guard answered for the merged promotion right after the merge.
    pub guard_at_merge: Vec<String>,
    /// `git log --oneline --graph` of the story.
    pub log: String,
    /// When the story's fleet time started ([`options::fleet_start`]: the coming Monday,
    /// 06:00 UTC).
    pub fleet_start: chrono::DateTime<chrono::Utc>,
    /// Fleet time the story covered.
    pub fleet_time: chrono::Duration,
    pub wall_time: Duration,
    /// The folder (removed at the end unless kept).
    pub dir: PathBuf,
    /// The simulated cloud's own record: every instance that came in service, with its
    /// image (what the ledger is checked against).
    pub ran: Vec<rota_sim::cloud::Ran>,
    /// (d): the failure, and what every view said at each of its steps.
    pub failure: failure::Failure,
    /// The EKS managed node group's updates as EKS made them, `image status` each
    /// ([`managed`]).
    pub managed_updates: Vec<String>,
}

/// The workloads of every simulated cluster: the default profile without its singleton
/// license server (whose `minAvailable: 1` PDB blocks every drain, on purpose, in other
/// scenarios: here it would only stop the story on a drain timeout).
pub const WORKLOADS: &str = r#"
nodes: {perPool: 3, registerAfter: 15s, readyAfter: 20s}
deployments:
  - {name: web, namespace: shop, replicas: 6, pdb: {minAvailable: "50%"}}
  - {name: api, namespace: shop, replicas: 4, pdb: {maxUnavailable: "25%"}}
  - {name: worker, namespace: shop, replicas: 3}
  - {name: postgres, namespace: data, replicas: 3, memory: 1Gi, emptyDir: true, gracePeriod: 60s, pdb: {maxUnavailable: 1}}
daemonSets:
  - {name: node-exporter, namespace: monitoring, cpu: 50m, memory: 64Mi, readyAfter: 5s}
  - {name: log-shipper, namespace: logging, cpu: 100m, memory: 128Mi, readyAfter: 5s}
"#;

const CANARY_V1: &str = r#"images: {general: "2026.11.1", gpu: "2026.11.1"}"#;
const CANARY_V2: &str = r#"images: {general: "2026.11.2", gpu: "2026.11.1"}"#;
const EARLY_V1: &str = r#"images: {general: "2026.11.1", gpu: "2026.10.3"}
      soak: 24h"#;
const EARLY_V2: &str = r#"images: {general: "2026.11.2", gpu: "2026.10.3"}
      soak: 24h"#;
const PROMETHEUS: &str = "http://prometheus.monitoring:9090";
/// prod-use1's last pool in the example, where the demo adds its managed pool after it.
const PROD_USE1_LAST: &str = "      rollout: {batch: 1, batchSoak: 20m}\n";
/// An EKS managed node group: rota changes it only through EKS's API (its own update, with
/// rota's policy mapped onto the update's settings), never its launch template.
const MANAGED_POOL: &str =
    "    # An EKS managed node group: rota rotates it through EKS's own update
    # (UpdateNodegroupVersion), never by writing its launch template.
    - name: system
      channel: general
      nodeSelector: {eks.amazonaws.com/nodegroup: system}
      group: {eksNodegroup: system}
      rollout:
        managedUpdate: service
        windows: []           # any time, like batch
";
const MANAGED_COMMIT: &str =
    "prod-use1: pool system, an EKS managed node group (changed only through EKS's API)";
const PROMOTION_BRANCH: &str = "promote/early-general-2026.11.2";

/// Plays the story; writes what happens to `out`.
pub async fn run(opts: DemoOptions, out: &mut dyn Write) -> Result<Outcome, String> {
    let tmp;
    let dir = match &opts.keep {
        Some(d) => {
            if d.exists()
                && std::fs::read_dir(d)
                    .map_err(|e| format!("--keep {}: {e}", d.display()))?
                    .next()
                    .is_some()
            {
                return Err(format!(
                    "--keep {}: the folder exists and is not empty",
                    d.display()
                ));
            }
            std::fs::create_dir_all(d).map_err(|e| format!("--keep {}: {e}", d.display()))?;
            tmp = None;
            d.canonicalize()
                .map_err(|e| format!("--keep {}: {e}", d.display()))?
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("rota-demo.")
                .tempdir()
                .map_err(|e| format!("cannot create a temporary folder: {e}"))?;
            let p = t.path().to_path_buf();
            tmp = Some(t);
            p
        }
    };
    let result = Story::play(&opts, &dir, out).await;
    drop(tmp);
    result
}

impl<'a> Story<'a> {
    async fn play(
        opts: &'a DemoOptions,
        dir: &std::path::Path,
        out: &'a mut dyn Write,
    ) -> Result<Outcome, String> {
        let start_wall = std::time::Instant::now();
        let say = |out: &mut dyn Write, s: &str| {
            let _ = writeln!(out, "\n== {s}");
        };
        say(
            out,
            &format!(
                "a fleet git repo from examples/fleet-repo in {} (origin fleet.git, clone work)",
                dir.display()
            ),
        );
        let d = dir.to_path_buf();
        let repo = blocking(move || DemoRepo::create(&d)).await?;
        let prom = prometheus::serve()
            .await
            .map_err(|e| format!("demo: cannot listen on loopback: {e}"))?;
        let (r, url) = (repo.clone(), prom.url.clone());
        let (initial, managed, prometheus) = blocking(move || {
            // The example pins the canary and early waves one version ahead: start every wave
            // on 2026.11.1, so that the story can move them.
            r.edit("fleet.yaml", CANARY_V2, CANARY_V1)?;
            r.edit("fleet.yaml", EARLY_V2, EARLY_V1)?;
            let initial = r.commit("fleet: acme, every wave on general 2026.11.1")?;
            r.edit(
                "clusters/aws/prod-use1.yaml",
                PROD_USE1_LAST,
                &format!("{PROD_USE1_LAST}{MANAGED_POOL}"),
            )?;
            let managed = r.commit(MANAGED_COMMIT)?;
            let path = "gates/prometheus.yaml";
            let text = r.read(path)?;
            std::fs::write(r.work.join(path), text.replace(PROMETHEUS, &url))
                .map_err(|e| format!("cannot write {path}: {e}"))?;
            let prometheus = r.commit(&format!(
                "demo: the Prometheus gates query the demo's stand-in at {url}\n\n\
                 prometheus.monitoring:9090 does not exist next to the simulated fleet; the\n\
                 stand-in answers every query with 0 (no errors). Nothing else changes."
            ))?;
            r.push()?;
            Ok((initial, managed, prometheus))
        })
        .await?;
        let _ = writeln!(
            out,
            "{} fleet: acme, every wave on general 2026.11.1\n{} {MANAGED_COMMIT}\n{} demo: the Prometheus gates query the demo's stand-in at {}",
            &initial[..7],
            &managed[..7],
            &prometheus[..7],
            prom.url
        );

        // On paused time the speed only sets how much fleet time one tick of the agents' and
        // controllers' own loops covers (less work per fleet hour); soaks, boots and timeouts
        // are fleet time either way.
        let speed = match opts.pace {
            Pace::Jump => opts.jump_speed,
            Pace::Speed(s) => s,
        };
        // Fetches are also triggered right after each push (`poke`).
        // Other clusters' records (which the guard reads) arrive with fetches: poll often.
        let (poll, resync) = (Duration::from_secs(2), Duration::from_secs(1));
        let start = options::fleet_start(chrono::Utc::now());
        let _ = writeln!(
            out,
            "fleet time starts {} (the coming Monday 06:00 UTC, so that every run meets the same maintenance windows)",
            start.format("%a %Y-%m-%d %H:%M UTC")
        );
        let workloads = WorkloadProfile::from_yaml(WORKLOADS, "demo workloads")
            .map_err(|e| format!("demo: {e}"))?;
        let fleet = LocalFleet::start(LocalConfig {
            repo: repo.origin.clone(),
            branch: "main".into(),
            state_dir: dir.join("state"),
            workloads,
            speed,
            poll,
            resync,
            trust: None,
            webhook: None,
            statuses: None,
            report: Default::default(),
            start: Some(start),
        })
        .await
        .map_err(|e| format!("demo: cannot start the simulated fleet: {e}"))?;
        let loaded = crate::source::read::load_git(&repo.origin, "refs/heads/main")
            .map_err(|d| format!("demo: {d}"))?;
        let mut order = Vec::new();
        for (k, w) in loaded.waves().iter().enumerate() {
            for c in loaded.clusters_in_wave(k) {
                order.push((c.to_string(), w.name.clone()));
            }
        }
        // Handles of what is served over loopback: dropping them stops serving.
        let mut served: Vec<Box<dyn std::any::Any>> = Vec::new();
        if opts.http {
            let mut contexts = Vec::new();
            for (name, store) in &fleet.sim.clusters {
                let server = rota_sim::apiserver::ApiServer::new(store.clone()).with_speed(speed);
                let s = rota_sim::apiserver::serve_http(server)
                    .await
                    .map_err(|e| format!("demo: cannot listen on loopback: {e}"))?;
                contexts.push((name.clone(), s.url()));
                served.push(Box::new(s));
            }
            let cloud = rota_sim::wire::serve(std::sync::Arc::new(fleet.sim.cloud.clone()))
                .await
                .map_err(|e| format!("demo: cannot listen on loopback: {e}"))?;
            let kc = dir.join("kubeconfig");
            rota_sim::kubeconfig::write_with_cloud(&kc, &contexts, &cloud.url)
                .map_err(|e| format!("demo: cannot write {}: {e}", kc.display()))?;
            let _ = writeln!(
                out,
                "the simulated clusters are served on loopback: kubectl --kubeconfig {} --context canary-use1 get npr",
                kc.display()
            );
            served.push(Box::new(cloud));
        }
        let agents = fleet.agents.clone();
        // The story's `0m` is the fleet time the clocks were started at (not read again after
        // the agents started), so that `Outcome::fleet_start` is exactly the Monday 06:00 the
        // story announced.
        let start_fleet = start;
        let mut commits = BTreeMap::new();
        commits.insert("initial".to_string(), initial);
        commits.insert("managed".to_string(), managed);
        commits.insert("prometheus".to_string(), prometheus.clone());
        let mut story = Story {
            opts,
            out,
            repo,
            fleet,
            order,
            agents,
            seen: view::Seen::new(),
            drawn: 0,
            last_draw: None,
            start_fleet,
            start_wall,
            commits,
        };
        let result = story.chapters(&prometheus).await;
        let outcome = match result {
            Ok(o) => o,
            Err(e) => {
                let table = view::table(&story.views()).join("\n");
                return Err(format!("{e}\nlast statuses:\n{table}"));
            }
        };
        if opts.serve {
            story.serve_on(dir).await;
        }
        // A clean shutdown: each agent writes its ledger's last pass, so the lives that ended
        // since its last look are closed (`rota audit` after the demo shows them left).
        let Story { fleet, .. } = story;
        let ran = fleet.sim.cloud.ran();
        fleet.shutdown().await;
        drop(served);
        drop(prom);
        Ok(Outcome {
            dir: dir.to_path_buf(),
            ran,
            ..outcome
        })
    }

    async fn chapters(&mut self, head: &str) -> Result<Outcome, String> {
        self.say("adoption: every agent starts on a fleet already running, the promotion guard on");
        let all: Vec<String> = self.order.iter().map(|(c, _)| c.clone()).collect();
        let canary = self.clusters_of("canary");
        let early = self.clusters_of("early");
        self.wait("every pool is adopted on its wave's pins", |s, v| {
            s.all_on(v, &all, head, |st| st == State::Success)
        })
        .await?;
        // The evidence the guards of later waves read: a record of kind `adopted` per pool
        // (wave early pins gpu 2026.10.3, which the canary is past: without adoption its gpu
        // pools would wait for the canary forever).
        let adopted = self.adopted(head).await?;
        self.note(&format!(
            "{} pools adopted (records of kind `adopted` in refs/notes/rota/<cluster>; the managed prod-use1/system read through EKS's API), e.g. {}",
            adopted.len(),
            adopted
                .iter()
                .find(|a| a.contains("gpu@2026.10.3"))
                .or(adopted.first())
                .cloned()
                .unwrap_or_default()
        ));

        // (a) bump the canary wave.
        self.say("(a) PR merged: the canary wave takes general 2026.11.2");
        let r = self.repo.clone();
        let bump = blocking(move || {
            r.edit("fleet.yaml", CANARY_V1, CANARY_V2)?;
            let c = r.commit("canary: general 2026.11.2")?;
            r.push()?;
            Ok(c)
        })
        .await?;
        self.note(&format!("{} canary: general 2026.11.2", &bump[..7]));
        self.commits.insert("bump".into(), bump.clone());
        self.fleet.poke();
        self.wait("the canary wave rolls general 2026.11.2", |s, v| {
            s.all_on(v, &canary, &bump, |st| st == State::Success)
        })
        .await?;

        // (b) promote wave early through a merged branch, before the canary soaked.
        self.say(&format!(
            "(b) a PR moves wave early's pin to general 2026.11.2 (branch {PROMOTION_BRANCH}), merged at once"
        ));
        let r = self.repo.clone();
        let (branch, merge) = blocking(move || {
            r.git(&["checkout", "-q", "-b", PROMOTION_BRANCH])?;
            r.edit("fleet.yaml", EARLY_V1, EARLY_V2)?;
            let b = r.commit("early: general 2026.11.2")?;
            r.git(&["checkout", "-q", "main"])?;
            r.git(&[
                "merge",
                "-q",
                "--no-ff",
                "-m",
                &format!("Merge branch '{PROMOTION_BRANCH}'"),
                PROMOTION_BRANCH,
            ])?;
            let m = r.git(&["rev-parse", "HEAD"])?;
            r.push()?;
            Ok((b, m))
        })
        .await?;
        self.note(&format!(
            "{} early: general 2026.11.2\n{} Merge branch '{PROMOTION_BRANCH}'",
            &branch[..7],
            &merge[..7]
        ));
        self.commits
            .insert("promotion-branch".into(), branch.clone());
        self.commits.insert("merge".into(), merge.clone());
        self.fleet.poke();
        let guard = self.guard(&bump, &merge).await?;
        for line in &guard {
            self.note(&format!("rota promote --check: {line}"));
        }
        self.wait(
            "wave early waits for the canary's soak, then rolls",
            |s, v| {
                // A pool outside its maintenance window waits for it (prod-use1/general: Mon-Thu
                // 14:00-20:00 New York): `waiting for a maintenance window`, or `deferred until`
                // the next window with room for a batch. The story goes on meanwhile, rather
                // than wait up to four days of fleet time for Monday afternoon.
                early.iter().all(|c| {
                    let st = s.statuses_on(v, c, &merge);
                    !st.is_empty()
                        && st.iter().skip(1).all(|p| {
                            p.state != State::Pending
                                || p.description.starts_with(WINDOW_WAIT)
                                || p.description.starts_with(DEFERRED)
                        })
                })
            },
        )
        .await?;

        let managed_updates = self.managed_updates().await?;

        // (c) bump again, revert midway.
        let revert_progress = self.revert_midway(&canary).await?;

        // (d) the demo fails once.
        let failure = self.fails_once().await?;
        let mut outcome = self.epilogue(revert_progress, guard, failure).await?;
        outcome.managed_updates = managed_updates;
        Ok(outcome)
    }

    /// (c): the clouds publish a build; discovery proposes it on the canary wave; midway, a
    /// person reverts it with `git revert`. Returns the canary pools' descriptions seen on
    /// the revert commit (the rollback as it happened).
    async fn revert_midway(&mut self, canary: &[String]) -> Result<Vec<String>, String> {
        let again = self.discover_and_propose(&GOOD_BUILD, "bump-again").await?;
        self.fleet.poke();
        self.wait("canary-use1/general is midway (batch 2)", |s, v| {
            s.pool(v, "canary-use1", "general", &again)
                .is_some_and(|st| {
                    st.state == State::Pending && st.description.starts_with("batch 2/")
                })
        })
        .await?;
        self.say("2026.11.3 misbehaves: git revert, midway");
        let r = self.repo.clone();
        let revert = blocking(move || {
            r.git(&["revert", "--no-edit", "HEAD"])?;
            let c = r.git(&["rev-parse", "HEAD"])?;
            r.push()?;
            Ok(c)
        })
        .await?;
        self.note(&format!(
            "{} Revert \"images: general 2026.11.3 on wave canary\"",
            &revert[..7]
        ));
        self.commits.insert("revert".into(), revert.clone());
        self.fleet.poke();
        let mut revert_progress = Vec::new();
        self.wait("the canary wave rolls back to general 2026.11.2", |s, v| {
            for c in canary {
                for st in s.statuses_on(v, c, &revert).into_iter().skip(1) {
                    if revert_progress.last() != Some(&st.description) {
                        revert_progress.push(st.description.clone());
                    }
                }
            }
            s.all_on(v, canary, &revert, |st| st == State::Success)
        })
        .await?;
        Ok(revert_progress)
    }

    /// The story in git, each commit's statuses, and what the story did.
    async fn epilogue(
        &mut self,
        revert_progress: Vec<String>,
        guard: Vec<String>,
        failure: failure::Failure,
    ) -> Result<Outcome, String> {
        self.say("the story in git");
        let r = self.repo.clone();
        let log = blocking(move || r.git(&["log", "--oneline", "--graph", "main"])).await?;
        let _ = writeln!(self.out, "{log}");
        self.say("each commit's statuses (git notes on the origin, refs/notes/rota/<cluster>)");
        let r = self.repo.clone();
        let list = blocking(move || r.git(&["rev-list", "main"])).await?;
        let store = GitNotesStore::new(&self.repo.origin, None, None);
        store.scope_to(self.order.iter().map(|(c, _)| c.clone()));
        let mut statuses = BTreeMap::new();
        for sha in list.lines() {
            let r = self.repo.clone();
            let s = sha.to_string();
            let subject = blocking(move || r.git(&["log", "-1", "--format=%h %s", &s])).await?;
            let docs = store.docs(sha).await.map_err(|e| format!("demo: {e}"))?;
            let mut all: Vec<CommitStatus> = Vec::new();
            let _ = writeln!(self.out, "{subject}");
            for doc in &docs {
                for s in &doc.statuses {
                    all.push(CommitStatus {
                        context: s.context.clone(),
                        state: s.state,
                        description: s.description.clone(),
                        target_url: s.target_url.clone(),
                        stop: s.stop.clone(),
                    });
                }
            }
            all.sort_by(|a, b| a.context.cmp(&b.context));
            if all.is_empty() {
                let _ = writeln!(self.out, "    (no statuses: no agent acted on it)");
            }
            for s in &all {
                let _ = writeln!(
                    self.out,
                    "    {} {:<26} {}",
                    view::icon(s.state),
                    s.context,
                    s.description
                );
            }
            statuses.insert(sha.to_string(), all);
        }
        let pools = self.pools().await?;
        let fleet_time = self.fleet.clock.now() - self.start_fleet;
        let wall_time = self.start_wall.elapsed();
        self.say(&format!(
            "done: {} of fleet time in {:.1}s",
            view::elapsed(fleet_time),
            wall_time.as_secs_f64()
        ));
        if self.opts.keep.is_some() {
            // The fleet's clock ran ahead of the wall's: the evidence is asked for at the
            // story's end, not at the reader's now (when the story had not happened yet).
            let end = self
                .fleet
                .clock
                .now()
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let origin = self.repo.origin.display();
            let _ = writeln!(
                self.out,
                "audit it (docs/audit.md): which nodes ran the reverted version, and the evidence
  rota audit --repo {origin} --image general@2026.11.3
  rota evidence --repo {origin} --at {end}"
            );
        }
        Ok(Outcome {
            commits: self.commits.clone(),
            statuses,
            pools,
            revert_progress,
            guard_at_merge: guard,
            log,
            fleet_start: self.start_fleet,
            fleet_time,
            wall_time,
            dir: PathBuf::new(),
            ran: Vec::new(),
            failure,
            managed_updates: Vec::new(),
        })
    }

    fn clusters_of(&self, wave: &str) -> Vec<String> {
        self.order
            .iter()
            .filter(|(_, w)| w == wave)
            .map(|(c, _)| c.clone())
            .collect()
    }

    /// `cluster/pool channel@version` of every pool recorded as adopted on `commit`; an error
    /// unless every self-managed pool of the fleet is (the story starts on a fleet already on
    /// its pins). The agent does not adopt a managed pool (`agent::adopt` observes groups
    /// rota writes itself): prod-use1/system reports its pin like the others but goes
    /// through the promotion guard, which its wave's pin of 2026.11.1 passes.
    async fn adopted(&self, commit: &str) -> Result<Vec<String>, String> {
        let store = GitNotesStore::new(&self.repo.origin, None, None);
        store.scope_to(self.order.iter().map(|(c, _)| c.clone()));
        let records = store
            .pool_records(commit)
            .await
            .map_err(|e| format!("demo: reading the records on {commit}: {e}"))?;
        let mut out = Vec::new();
        let mut not = Vec::new();
        for r in &records {
            match r
                .completions
                .iter()
                .find(|c| c.kind == rota_core::waves::CompletionKind::Adopted)
            {
                Some(c) => out.push(format!(
                    "{}/{} {}@{}",
                    r.cluster, r.pool, c.channel, c.version
                )),
                None if (r.cluster.as_str(), r.pool.as_str())
                    == (managed::CLUSTER, managed::POOL) => {}
                None => not.push(format!("{}/{}", r.cluster, r.pool)),
            }
        }
        if !not.is_empty() || out.is_empty() {
            return Err(format!(
                "demo: pools not adopted on their pins: [{}] (of {} records)",
                not.join(", "),
                records.len()
            ));
        }
        Ok(out)
    }

    /// A new build of general: the clouds publish it (an AMI in each region the fleet uses,
    /// named as the channel's `nameFilter` expects; the GCP image in the channel's family;
    /// the gallery version), baked past the channel's `minAge`; `rota images discover
    /// --write` proposes it, pinned on the canary wave, and the commit is pushed (the PR
    /// merged). Returns the commit, recorded as `step`.
    async fn discover_and_propose(&mut self, build: &Build, step: &str) -> Result<String, String> {
        use rota_core::cloud::Arch;
        use rota_sim::images::SimImage;
        let created = chrono::Utc::now() - build.age;
        let dashed = build.version.replace('.', "-");
        let gallery = "/subscriptions/1b2c3d4e-0000-4000-8000-000000000001/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/general";
        let bad = |i: SimImage| match build.defect {
            Some(why) => i.defective(why),
            None => i,
        };
        let mut gcp = SimImage::new(
            format!("projects/acme-images/global/images/general-{dashed}"),
            &[],
            Arch::X86_64,
        )
        .named(format!("general-{dashed}"), created);
        gcp.family = Some("acme-general".into());
        for (ami, region) in build.amis {
            let image = SimImage::new(*ami, &[region], Arch::X86_64)
                .named(format!("acme-general-{dashed}"), created);
            self.fleet.sim.cloud.publish_image(bad(image));
        }
        self.fleet.sim.cloud.publish_image(bad(gcp));
        self.fleet.sim.cloud.publish_image(bad(SimImage::new(
            format!("{gallery}/versions/{}", build.version),
            &[],
            Arch::X86_64,
        )
        .named(build.version, created)));
        self.say(build.headline);
        let work = self.repo.work.clone();
        let (files, commit) = blocking(move || {
            let (files, _, commit) =
                crate::source::read::read_git(&work, "HEAD", None).map_err(|d| d.to_string())?;
            Ok((files, commit))
        })
        .await?;
        let fleet = rota_core::fleet::load_files(&files).map_err(|d| d.to_string())?;
        let now = chrono::Utc::now();
        let reports =
            crate::discovery::discover(&fleet, &self.fleet.sim.cloud, Some("general"), now, None)
                .await?;
        for r in &reports {
            let line = crate::discovery::describe(r, now);
            self.note(&format!("rota images discover: {line}"));
        }
        let r = self.repo.clone();
        let again = blocking(move || {
            let to = crate::discovery::WriteTo {
                repo: &r.work,
                parent: &commit,
                subdir: None,
                target: crate::discovery::Target::CurrentBranch,
            };
            crate::discovery::write(&files, &fleet, &reports, &to)?
                .ok_or("demo: discovery proposed nothing for general")?;
            r.push()?;
            r.git(&["rev-parse", "HEAD"])
        })
        .await?;
        self.commits.insert(step.into(), again.clone());
        self.note(&format!(
            "{} images: general {} on wave canary",
            &again[..7],
            build.version
        ));
        Ok(again)
    }

    /// What `rota promote --check` says about the merged promotion, as of the fleet's clock.
    async fn guard(&self, base: &str, merge: &str) -> Result<Vec<String>, String> {
        let query = crate::promotion::Query {
            wave: Some("early".into()),
            repo: self.repo.origin.clone(),
            rev: merge.into(),
            check: true,
            base: base.into(),
            subdir: None,
            agent_signers: None,
        };
        let checks = crate::promotion::checks_at(&query, self.fleet.clock.now()).await?;
        Ok(checks.iter().map(crate::promotion::describe).collect())
    }

    fn views(&self) -> Vec<ClusterView> {
        self.order
            .iter()
            .map(|(c, w)| {
                let snap = self.agents.get(c).map(|r| r.borrow().clone());
                ClusterView {
                    name: c.clone(),
                    wave: w.clone(),
                    // The commit the statuses are on, not the newer one in force.
                    in_force: snap.as_ref().and_then(|s| s.reported.clone()),
                    statuses: snap.map(|s| s.statuses).unwrap_or_default(),
                }
            })
            .collect()
    }

    /// The statuses `cluster` reports, if its commit in force is `commit`.
    fn statuses_on<'v>(
        &self,
        v: &'v [ClusterView],
        cluster: &str,
        commit: &str,
    ) -> Vec<&'v CommitStatus> {
        v.iter()
            .find(|c| c.name == cluster && c.in_force.as_deref() == Some(commit))
            .map(|c| c.statuses.iter().collect())
            .unwrap_or_default()
    }

    fn pool<'v>(
        &self,
        v: &'v [ClusterView],
        cluster: &str,
        pool: &str,
        commit: &str,
    ) -> Option<&'v CommitStatus> {
        let context = crate::report::pool_context(cluster, pool);
        self.statuses_on(v, cluster, commit)
            .into_iter()
            .find(|s| s.context == context)
    }

    /// Every cluster of `clusters` has `commit` in force and a cluster status that `ok`s.
    fn all_on(
        &self,
        v: &[ClusterView],
        clusters: &[String],
        commit: &str,
        ok: impl Fn(State) -> bool,
    ) -> bool {
        clusters.iter().all(|c| {
            self.statuses_on(v, c, commit)
                .first()
                .is_some_and(|s| ok(s.state))
        })
    }

    fn say(&mut self, s: &str) {
        let t = view::elapsed(self.fleet.clock.now() - self.start_fleet);
        let _ = writeln!(self.out, "\n== [{t}] {s}");
        self.drawn = 0;
    }

    fn note(&mut self, s: &str) {
        let _ = writeln!(self.out, "{s}");
        self.drawn = 0;
    }

    /// Shows the fleet: in a terminal, the table redrawn in place (at most 10 times a
    /// second unless `force`); otherwise one line per status that changed.
    fn show(&mut self, v: &[ClusterView], force: bool) {
        let t = view::elapsed(self.fleet.clock.now() - self.start_fleet);
        if self.opts.tty {
            let due = self
                .last_draw
                .is_none_or(|l| l.elapsed() >= Duration::from_millis(100));
            if !(due || force) {
                return;
            }
            self.last_draw = Some(std::time::Instant::now());
            let mut lines = vec![format!("fleet time +{t}")];
            lines.extend(view::table(v));
            let mut s = String::new();
            if self.drawn > 0 {
                s += &format!("\x1b[{}A\x1b[J", self.drawn);
            }
            for l in &lines {
                s += l;
                s += "\n";
            }
            let _ = self.out.write_all(s.as_bytes());
            let _ = self.out.flush();
            self.drawn = lines.len();
        } else {
            for line in view::changes(v, &mut self.seen) {
                let _ = writeln!(self.out, "  +{t:>6}  {line}");
            }
        }
    }

    /// Waits until `done` holds over the agents' reports, showing progress meanwhile.
    async fn wait(
        &mut self,
        what: &str,
        mut done: impl FnMut(&Self, &[ClusterView]) -> bool,
    ) -> Result<(), String> {
        let start = std::time::Instant::now();
        loop {
            let v = self.views();
            let finished = done(self, &v);
            self.show(&v, finished);
            if finished {
                return Ok(());
            }
            if start.elapsed() > self.opts.step_limit {
                return Err(format!(
                    "demo: {what}: not done after {}s of wall time",
                    self.opts.step_limit.as_secs()
                ));
            }
            let changed = futures::future::select_all(
                self.agents.values_mut().map(|r| Box::pin(r.changed())),
            );
            // A timer too, so that the wall-time limit is checked even if nothing reports.
            let _ = tokio::time::timeout(Duration::from_secs(60), changed).await;
        }
    }

    /// Where every pool's NodePoolRotation ended.
    async fn pools(&self) -> Result<BTreeMap<String, PoolEnd>, String> {
        let mut out = BTreeMap::new();
        for (cluster, client) in &self.fleet.clients {
            let list = Api::<NodePoolRotation>::all(client.clone())
                .list(&ListParams::default())
                .await
                .map_err(|e| format!("demo: listing NodePoolRotations of {cluster}: {e}"))?;
            for n in list.items {
                let st = n.status.clone().unwrap_or_default();
                out.insert(
                    format!("{cluster}/{}", n.name_any()),
                    PoolEnd {
                        version: n.spec.version.clone(),
                        image: n.spec.image.clone(),
                        phase: format!("{:?}", st.phase),
                        on_target: st.on_target,
                        total: st.total,
                        stop: st
                            .stop
                            .as_ref()
                            .map(|n| format!("{} ({:?})", n.reason, n.by)),
                        message: st.message.clone(),
                    },
                );
            }
        }
        Ok(out)
    }

    /// `--serve`: keep the fleet served (in real time from now on) until Ctrl-C.
    async fn serve_on(&mut self, dir: &std::path::Path) {
        if self.opts.pace == Pace::Jump {
            // From here on the clock runs in real time: there is nothing left to skip.
            tokio::time::resume();
        }
        // The fleet page (`rota ui`) over the repo the agents push their notes to.
        let page = crate::ui::server::Ui::new(
            crate::ui::load::RepoAt {
                repo: self.repo.origin.clone(),
                rev: "refs/heads/main".into(),
                subdir: None,
                agent_signers: None,
            },
            crate::ui::server::Limits::default(),
        )
        .spawn(([127, 0, 0, 1], 0).into())
        .await;
        let _ui = match page {
            Ok((addr, task)) => {
                let _ = writeln!(self.out, "\nthe fleet page: http://{addr}/");
                Some(AbortOnDrop(task))
            }
            Err(e) => {
                let _ = writeln!(self.out, "\nthe fleet page is not served: {e}");
                None
            }
        };
        let _ = writeln!(
            self.out,
            "\nserving until Ctrl-C. Try:\n  export KUBECONFIG={}\n  kubectl config get-contexts\n  kubectl --context canary-use1 get nodepoolrotations\n  kubectl --context canary-use1 get nodes -L eks.amazonaws.com/nodegroup\n  git -C {} log --notes='rota/*' --oneline -3",
            dir.join("kubeconfig").display(),
            self.repo.origin.display()
        );
        let _ = self.out.flush();
        crate::shutdown::wait_for_stop().await;
    }
}

/// Stops a served task when the story ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
