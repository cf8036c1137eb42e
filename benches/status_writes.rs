//! Commit-status writes a forge takes for one fleet commit, at 10, 400 and 10,000 clusters
//! of 5 pools each, for three commits (`noop`: changes no pool; `canary`: moves the canary
//! wave's pin, 1% of the clusters; `all`: moves every pool) and three ways of reporting:
//! `before` (every context on every commit, each change posted: what agents did before the
//! economy), `pools` (`report::economy` over per-pool and per-cluster contexts, within the
//! fleet's budget, `report::budget`) and `waves` (one `rota/wave/<name>` rollup a wave,
//! `report::rollup`, written by one agent a wave, within the budget).
//!
//! The agents are modelled, the decisions are rota's: each agent's passes give the statuses
//! `agent::progress` would (a moved pool: the controller catching up, two batches, done; a
//! pool the commit leaves: catching up, then done as before), the cluster's from
//! `progress::cluster_status`; what is posted is what `economy::select`, `rollup::wave_status`
//! and `budget::BudgetedStore` let through, into one forge double that, as the forge stores
//! do, costs nothing for a status the commit already holds. Time is tokio's, paused: the
//! budget's hours pass in moments.
//!
//! Prints one line per case, for a script:
//! `status_writes clusters=400 commit=all contexts=pools writes=... max_per_hour=...
//! last_write_h=... deferred_at_end=...`. The fleet's budget is 3,000 an hour (the agent's
//! default on GitHub, whose token has 5,000). `max_per_hour` is the most posts in one clock
//! hour after the commit. Waves: canary 1% of the clusters (at least one), early 10%, main the
//! rest. A moved pool takes 20 to 80 minutes (spread by cluster); agents pass on every change
//! and catch up deferred writes every 5 minutes.
//!
//! Run: `cargo bench --bench figures -- status_writes` (10, 400 and 10,000 clusters);
//! `ROTA_BENCH_CLUSTERS=400` picks one size. The counts do not depend on the build profile:
//! `cargo test --bench figures -- status_writes --bench` gives the same figures from a debug
//! build. Without `--bench`, a smoke pass at 10 and 40 clusters.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use rota::agent::progress::cluster_status;
use rota::report::budget::BudgetedStore;
use rota::report::economy::{self, Candidate, Contexts, Written};
use rota::report::rollup::{self, PinnedPool};
use rota::report::{CommitStatus, Posted, ReportError, State, StatusStore};
use rota::waves::PoolRecord;

const POOLS: usize = 5;
const BUDGET: f64 = 3000.0;
const OLD: &str = "0000000000000000000000000000000000000001";
const NEW: &str = "0000000000000000000000000000000000000002";
const MINUTE: u64 = 60;
/// How long the budget's catch-up is followed.
const HORIZON_H: u64 = 72;

/// The forge: every post with its time, nothing for a status the commit already holds.
#[derive(Default)]
struct Forge {
    held: Mutex<HashMap<(String, String), CommitStatus>>,
    posts: Mutex<Vec<Duration>>,
    start: Mutex<Option<tokio::time::Instant>>,
}

#[async_trait]
impl StatusStore for Forge {
    fn backend(&self) -> &'static str {
        "forge-double"
    }
    async fn list(&self, commit: &str) -> Result<Vec<CommitStatus>, ReportError> {
        let held = self.held.lock().unwrap();
        Ok(held
            .iter()
            .filter(|((c, _), _)| c == commit)
            .map(|(_, s)| s.clone())
            .collect())
    }
    async fn set(&self, commit: &str, s: &CommitStatus) -> Result<Posted, ReportError> {
        let key = (commit.to_string(), s.context.clone());
        let mut held = self.held.lock().unwrap();
        if held.get(&key).is_some_and(|h| h.same_as(s)) {
            return Ok(Posted::Unchanged);
        }
        held.insert(key, s.clone());
        let start = self.start.lock().unwrap().expect("started");
        self.posts.lock().unwrap().push(start.elapsed());
        Ok(Posted::Created)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Commit {
    Noop,
    Canary,
    All,
}

impl Commit {
    fn name(self) -> &'static str {
        match self {
            Commit::Noop => "noop",
            Commit::Canary => "canary",
            Commit::All => "all",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Way {
    Before,
    Pools,
    Waves,
}

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Before => "before",
            Way::Pools => "pools",
            Way::Waves => "waves",
        }
    }
}

struct Fleet {
    clusters: Vec<ClusterModel>,
    /// Each wave by its index: name and clusters (a wave of a small fleet may be empty).
    waves: Vec<(String, Vec<usize>)>,
    /// Each wave's rollup writer, as `rollup::writer` elects it.
    writers: Vec<Option<usize>>,
}

struct ClusterModel {
    name: String,
    wave: usize,
    moved: bool,
    /// Minutes a moved pool's batch takes.
    batch_min: u64,
}

fn fleet(n: usize, commit: Commit) -> Fleet {
    let canary = (n / 100).max(1);
    let early = canary + (n / 10).max(1);
    let clusters: Vec<ClusterModel> = (0..n)
        .map(|i| {
            let wave = if i < canary {
                0
            } else if i < early.min(n) {
                1
            } else {
                2
            };
            ClusterModel {
                name: format!("c{i:05}"),
                wave,
                moved: match commit {
                    Commit::Noop => false,
                    Commit::Canary => wave == 0,
                    Commit::All => true,
                },
                batch_min: 10 + (i as u64 * 7) % 31,
            }
        })
        .collect();
    let waves: Vec<(String, Vec<usize>)> = ["canary", "early", "main"]
        .iter()
        .enumerate()
        .map(|(w, name)| {
            let members: Vec<usize> = (0..n).filter(|&i| clusters[i].wave == w).collect();
            (name.to_string(), members)
        })
        .collect();
    let writers = waves
        .iter()
        .map(|(_, members)| {
            // Every agent up: the first candidate writes.
            let first = rollup::candidates(members.iter().map(|&m| clusters[m].name.as_str()))
                .first()
                .map(|c| c.to_string());
            members
                .iter()
                .copied()
                .find(|&i| Some(&clusters[i].name) == first.as_ref())
        })
        .collect();
    Fleet {
        clusters,
        waves,
        writers,
    }
}

/// The pool statuses (as `agent::progress` words them) of a cluster at `t` seconds after the
/// commit, and whether its controller is still catching up.
fn pool_statuses(c: &ClusterModel, t: u64) -> (Vec<CommitStatus>, bool) {
    let version = if c.moved { "2" } else { "1" };
    let cv = format!("general@{version}");
    let b = c.batch_min * MINUTE;
    let catching_up = t < MINUTE;
    let statuses = (0..POOLS)
        .map(|p| {
            let context = format!("rota/{}/p{p}", c.name);
            let (state, d) = if catching_up {
                (
                    State::Pending,
                    format!("waiting for the controller to take {cv}"),
                )
            } else if !c.moved || t >= MINUTE + 2 * b {
                (State::Success, format!("4/4 nodes on {cv}"))
            } else if t >= MINUTE + b {
                (State::Pending, format!("batch 2/2 · 2/4 nodes on {cv}"))
            } else {
                (State::Pending, format!("batch 1/2 · 0/4 nodes on {cv}"))
            };
            CommitStatus::new(context, state, &d)
        })
        .collect();
    (statuses, catching_up)
}

/// When a cluster's statuses change, in seconds after the commit.
fn changes(c: &ClusterModel) -> Vec<u64> {
    let b = c.batch_min * MINUTE;
    if c.moved {
        vec![0, MINUTE, MINUTE + b, MINUTE + 2 * b]
    } else {
        vec![0, MINUTE]
    }
}

/// The records the rollup reads at `t`: a pool is done on its pin once it shows success.
fn wave_records(f: &Fleet, members: &[usize], t: u64) -> (Vec<PinnedPool>, Vec<PoolRecord>) {
    let at = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
    let mut pins = Vec::new();
    let mut records = Vec::new();
    for &i in members {
        let c = &f.clusters[i];
        let version = if c.moved { "2" } else { "1" };
        let done = !c.moved || t >= MINUTE + 2 * c.batch_min * MINUTE;
        for p in 0..POOLS {
            let pool = format!("p{p}");
            pins.push(PinnedPool {
                cluster: c.name.clone(),
                pool: pool.clone(),
                channel: "general".into(),
                version: version.into(),
            });
            let r = PoolRecord::new(&c.name, &pool);
            records.push(if done {
                r.completed("general", version, at)
            } else {
                r
            });
        }
    }
    (pins, records)
}

struct Agent {
    store: Arc<dyn StatusStore>,
    written: Written,
}

/// One agent's pass at `t`: what it would report, through the way's rules.
async fn pass(f: &Fleet, i: usize, t: u64, way: Way, agent: &mut Agent) {
    let c = &f.clusters[i];
    let (pools, catching_up) = pool_statuses(c, t);
    let cluster = cluster_status(&c.name, &pools);
    let mut all: Vec<Candidate> = pools
        .into_iter()
        .chain([cluster])
        .map(|status| Candidate {
            status,
            unchanged: !c.moved,
            catching_up,
        })
        .collect();
    let (wave, members) = &f.waves[c.wave];
    if way == Way::Waves && f.writers[c.wave] == Some(i) {
        let (pins, records) = wave_records(f, members, t);
        all.push(Candidate {
            status: rollup::wave_status(wave, &pins, &records, None, None),
            unchanged: false,
            catching_up: false,
        });
    }
    let picked: Vec<CommitStatus> = match way {
        Way::Before => all.into_iter().map(|c| c.status).collect(),
        Way::Pools => economy::select(&all, &agent.written, Contexts::Pools, NEW)
            .into_iter()
            .cloned()
            .collect(),
        Way::Waves => economy::select(&all, &agent.written, Contexts::Waves, NEW)
            .into_iter()
            .cloned()
            .collect(),
    };
    for s in picked {
        agent
            .store
            .set(NEW, &s)
            .await
            .expect("the double takes all");
        agent.written.record(NEW, &s);
    }
}

struct Figures {
    writes: usize,
    max_per_hour: usize,
    last_write_h: f64,
    deferred_at_end: usize,
}

async fn run(n: usize, commit: Commit, way: Way) -> Figures {
    let f = fleet(n, commit);
    let forge = Arc::new(Forge::default());
    let mut budgets: Vec<Option<Arc<BudgetedStore>>> = Vec::new();
    let mut agents: Vec<Agent> = (0..n)
        .map(|i| {
            let (store, budget): (Arc<dyn StatusStore>, _) = if way == Way::Before {
                (forge.clone(), None)
            } else {
                let b = Arc::new(BudgetedStore::new(forge.clone(), BUDGET));
                (b.clone(), Some(b))
            };
            budgets.push(budget);
            // The commit before: every pool done on version 1 and said so.
            let mut written = Written::default();
            let name = &f.clusters[i].name;
            let old: Vec<CommitStatus> = (0..POOLS)
                .map(|p| {
                    CommitStatus::new(
                        format!("rota/{name}/p{p}"),
                        State::Success,
                        "4/4 nodes on general@1",
                    )
                })
                .collect();
            written.record(OLD, &cluster_status(name, &old));
            for s in &old {
                written.record(OLD, s);
            }
            Agent { store, written }
        })
        .collect();
    let writers = match way {
        Way::Waves => f.writers.iter().flatten().count(),
        _ => n,
    };
    for b in budgets.iter().flatten() {
        b.set_writers(writers).await;
    }
    *forge.start.lock().unwrap() = Some(tokio::time::Instant::now());
    let mut events: BTreeMap<u64, BTreeSet<usize>> = BTreeMap::new();
    for (i, c) in f.clusters.iter().enumerate() {
        for t in changes(c) {
            events.entry(t).or_default().insert(i);
        }
    }
    // The rollup's writer also passes whenever a cluster of its wave changes.
    if way == Way::Waves {
        for ((_, members), writer) in f.waves.iter().zip(&f.writers) {
            let Some(writer) = *writer else { continue };
            for &m in members {
                for t in changes(&f.clusters[m]) {
                    events.entry(t).or_default().insert(writer);
                }
            }
        }
    }
    let last_change = events.keys().copied().max().unwrap_or(0);
    let catch_up = 5 * MINUTE;
    let mut ticks: Vec<u64> = (0..=HORIZON_H * 3600 / catch_up)
        .map(|k| k * catch_up)
        .collect();
    ticks.retain(|t| !events.contains_key(t));
    for t in ticks {
        events.entry(t).or_default();
    }
    let start = tokio::time::Instant::now();
    for (t, who) in events {
        tokio::time::advance(
            (start + Duration::from_secs(t)).saturating_duration_since(tokio::time::Instant::now()),
        )
        .await;
        for &i in &who {
            pass(&f, i, t, way, &mut agents[i]).await;
        }
        // Catching up every 5 minutes; once every change is made and nothing waits, done.
        let mut waiting = 0;
        for b in budgets.iter().flatten() {
            b.flush().await.expect("the double takes all");
            waiting += b.deferred().await;
        }
        if t > last_change && waiting == 0 {
            break;
        }
    }
    let mut deferred = 0;
    for b in budgets.iter().flatten() {
        deferred += b.deferred().await;
    }
    let posts = forge.posts.lock().unwrap();
    let mut per_hour: BTreeMap<u64, usize> = BTreeMap::new();
    for p in posts.iter() {
        *per_hour.entry(p.as_secs() / 3600).or_default() += 1;
    }
    Figures {
        writes: posts.len(),
        max_per_hour: per_hour.values().copied().max().unwrap_or(0),
        last_write_h: posts
            .iter()
            .max()
            .map(|d| d.as_secs_f64() / 3600.0)
            .unwrap_or(0.0),
        deferred_at_end: deferred,
    }
}

fn env_size() -> Option<usize> {
    std::env::var("ROTA_BENCH_CLUSTERS")
        .ok()
        .and_then(|v| v.parse().ok())
}

pub fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let sizes: Vec<usize> = match env_size() {
        Some(n) => vec![n],
        None if bench => vec![10, 400, 10_000],
        None => vec![10, 40],
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    for &n in &sizes {
        for commit in [Commit::Noop, Commit::Canary, Commit::All] {
            for way in [Way::Before, Way::Pools, Way::Waves] {
                let f = rt.block_on(run(n, commit, way));
                println!(
                    "status_writes clusters={n} commit={} contexts={} writes={} per_cluster={:.2} max_per_hour={} last_write_h={:.1} deferred_at_end={}",
                    commit.name(),
                    way.name(),
                    f.writes,
                    f.writes as f64 / n as f64,
                    f.max_per_hour,
                    f.last_write_h,
                    f.deferred_at_end
                );
                // What the budget promises: the fleet within 1.5 times it in any hour while
                // each agent's share is two writes an hour or more; nothing left behind.
                let share = BUDGET / if way == Way::Waves { 3.0 } else { n as f64 };
                if way != Way::Before {
                    assert!(
                        share < 2.0 || f.max_per_hour as f64 <= 1.5 * BUDGET,
                        "{n} clusters, {commit:?}, {way:?}: {} writes in an hour",
                        f.max_per_hour
                    );
                    assert_eq!(f.deferred_at_end, 0, "{n} clusters, {commit:?}, {way:?}");
                }
            }
        }
    }
}
