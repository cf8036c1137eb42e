//! What the agent reports to its status store on a pass, decided here and written by
//! `report_writes`: every status to git notes (the
//! views read them there); to a forge, only what is worth a request (`report::economy`),
//! per pool and cluster or as the wave's rollup (`report::rollup`), within the fleet's write
//! budget (`report::budget`, the store's decorator).
//!
//! Whether a commit changes a pool is judged once per commit and pool, against the desired
//! state the pool had on the commit the agent reported before ([`Baseline`]): the
//! NodePoolRotation's spec, its `sourceCommit` aside. After a restart nothing is known, so
//! every status is written once more.

use std::collections::{BTreeMap, BTreeSet};

use crate::kube::crd::NodePoolRotation;
use crate::report::economy::{Candidate, Contexts};
use crate::report::rollup::{self, PinnedPool};
use crate::report::{CommitStatus, cluster_context};
use rota_core::fleet::resolved::DesiredCluster;
use rota_core::rotate::resource::NodePoolRotationSpec;

use super::desired::ClusterIntent;

/// How the agent reports to a forge (`rota agent --status-contexts`, `--status-page-url`).
#[derive(Debug, Clone, Default)]
pub struct ReportConfig {
    pub contexts: Contexts,
    /// The fleet page (`rota ui`), linked from the wave rollup.
    pub page_url: Option<String>,
    /// Statuses an hour the fleet's forge token may post (`report::budget`); `None`: the
    /// forge's default ([`default_budget`]).
    pub budget: Option<f64>,
}

/// The fleet-wide budget when none is set: 3,000 an hour on GitHub, which grants a token
/// 5,000 requests an hour: the agents' bursts reach 1.5 times their budget in an hour
/// (`report::budget::Bucket`), 4,500, which leaves room for reads and proposals. GitLab and
/// Gitea set their own limits per instance, so none.
pub fn default_budget(backend: &str) -> Option<f64> {
    (backend == "github").then_some(3000.0)
}

/// What the fleet at the commit in force says about reporting: this cluster's wave, its
/// pools with their pins, and how many agents share the write budget.
#[derive(Debug, Clone, Default)]
pub struct FleetShape {
    pub wave: String,
    pub wave_pools: Vec<PinnedPool>,
    pub clusters: usize,
    pub waves: usize,
}

impl FleetShape {
    pub fn of(all: &[DesiredCluster], me: &DesiredCluster) -> Self {
        let waves: BTreeSet<&str> = all.iter().map(|c| c.wave.as_str()).collect();
        FleetShape {
            wave: me.wave.clone(),
            wave_pools: all
                .iter()
                .filter(|c| c.wave == me.wave)
                .flat_map(|c| {
                    c.pools.iter().map(|p| PinnedPool {
                        cluster: c.name.clone(),
                        pool: p.name.clone(),
                        channel: p.channel.clone(),
                        version: p.version.clone(),
                    })
                })
                .collect(),
            clusters: all.len(),
            waves: waves.len(),
        }
    }

    /// Whether this agent may write its wave's rollup: it is one of the wave's
    /// [`rollup::CANDIDATES`], so it reads the wave's notes.
    pub fn may_write_rollup(&self, me: &str) -> bool {
        self.rollup_candidates().contains(&me)
    }

    /// The candidates for the wave's rollup, in the order they take it over.
    pub fn rollup_candidates(&self) -> Vec<&str> {
        rollup::candidates(self.wave_pools.iter().map(|p| p.cluster.as_str()))
    }

    /// The clusters whose records the rollup counts.
    pub fn wave_clusters(&self) -> BTreeSet<String> {
        self.wave_pools.iter().map(|p| p.cluster.clone()).collect()
    }
}

/// Each pool's desired state at the commits the agent reported, to tell which pools a
/// commit changes.
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    pools: BTreeMap<String, Seen>,
    /// The commit reported last and when this agent first reported it (the rollup's
    /// takeover counts from there).
    first_reported: Option<(String, chrono::DateTime<chrono::Utc>)>,
    /// The commits whose wave rollup this agent wrote lately (newest last), which it also
    /// finalises when a newer commit supersedes them.
    rollups: std::collections::VecDeque<String>,
}

#[derive(Debug, Clone)]
struct Seen {
    commit: String,
    spec: Option<NodePoolRotationSpec>,
    unchanged: bool,
}

fn without_commit(spec: Option<&NodePoolRotationSpec>) -> Option<NodePoolRotationSpec> {
    spec.cloned().map(|mut s| {
        s.source_commit.clear();
        s
    })
}

impl Baseline {
    /// Whether `commit` leaves `pool`'s desired state as it was on the commit before; the
    /// first answer on a commit stands for every pass on it.
    pub fn unchanged(
        &mut self,
        pool: &str,
        commit: &str,
        spec: Option<&NodePoolRotationSpec>,
    ) -> bool {
        let spec = without_commit(spec);
        match self.pools.get_mut(pool) {
            Some(seen) if seen.commit == commit => seen.unchanged,
            Some(seen) => {
                let unchanged = seen.spec == spec;
                *seen = Seen {
                    commit: commit.to_string(),
                    spec,
                    unchanged,
                };
                unchanged
            }
            None => {
                self.pools.insert(
                    pool.to_string(),
                    Seen {
                        commit: commit.to_string(),
                        spec,
                        unchanged: false,
                    },
                );
                false
            }
        }
    }
}

impl Baseline {
    /// How long ago this agent first reported `commit` (zero on its first report of it).
    pub fn reporting_for(
        &mut self,
        commit: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> chrono::Duration {
        match &self.first_reported {
            Some((c, since)) if c == commit => now - *since,
            _ => {
                self.first_reported = Some((commit.to_string(), now));
                chrono::Duration::zero()
            }
        }
    }

    /// This agent wrote `commit`'s wave rollup.
    pub fn wrote_rollup(&mut self, commit: &str) {
        if self.rollups.back().map(String::as_str) != Some(commit) {
            self.rollups.retain(|c| c != commit);
            self.rollups.push_back(commit.to_string());
            while self.rollups.len() > 8 {
                self.rollups.pop_front();
            }
        }
    }

    /// Whether this agent wrote `commit`'s wave rollup lately.
    pub fn has_rollup(&self, commit: &str) -> bool {
        self.rollups.iter().any(|c| c == commit)
    }
}

/// The clusters among `candidates` with notes on the commit whose statuses are `on_commit`.
pub fn reported<'a>(
    candidates: impl IntoIterator<Item = &'a str>,
    on_commit: &[CommitStatus],
) -> BTreeSet<String> {
    candidates
        .into_iter()
        .filter(|c| on_commit.iter().any(|s| own_context(&s.context, c, None)))
        .map(str::to_string)
        .collect()
}

/// The controller has not taken the NodePoolRotation's current spec yet.
pub fn catching_up(npr: Option<&NodePoolRotation>) -> bool {
    npr.is_some_and(|n| {
        n.status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .zip(n.metadata.generation)
            .is_none_or(|(seen, now)| seen != now)
    })
}

/// The statuses of a pass, as `progress` words them: the cluster's first, then each pool's.
pub fn statuses(
    cluster: &str,
    intent: &ClusterIntent,
    nprs: &BTreeMap<String, NodePoolRotation>,
    commit: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<CommitStatus> {
    let pools: Vec<CommitStatus> = intent
        .pools
        .iter()
        .map(|p| super::progress::pool_status(cluster, p, nprs.get(&p.name), commit, now))
        .collect();
    std::iter::once(super::progress::cluster_status(cluster, &pools))
        .chain(pools)
        .collect()
}

/// The candidates of a pass: pools, then the cluster (statuses as `progress` made them,
/// the cluster's first).
pub fn candidates(
    statuses: &[CommitStatus],
    intent: &ClusterIntent,
    unchanged: &BTreeSet<String>,
    behind: &BTreeSet<String>,
) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = intent
        .pools
        .iter()
        .zip(statuses.iter().skip(1))
        .map(|(p, s)| Candidate {
            status: s.clone(),
            unchanged: unchanged.contains(&p.name),
            catching_up: behind.contains(&p.name),
        })
        .collect();
    if let Some(cluster) = statuses.first() {
        out.push(Candidate {
            status: cluster.clone(),
            unchanged: intent.pools.iter().all(|p| unchanged.contains(&p.name)),
            catching_up: !behind.is_empty(),
        });
    }
    out
}

/// The contexts of this cluster (and, for the rollup's writer, its wave) that a newer
/// commit makes final on the one it replaces.
pub fn own_context(context: &str, cluster: &str, wave: Option<&str>) -> bool {
    let c = cluster_context(cluster);
    context == c
        || context.starts_with(&format!("{c}/"))
        || wave.is_some_and(|w| context == rollup::wave_context(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(version: &str, commit: &str) -> NodePoolRotationSpec {
        let c = super::super::desired::tests::cluster(
            "c",
            "canary",
            version,
            rota_core::fleet::resolved::Mode::Reconcile,
        );
        NodePoolRotationSpec::from_desired(&c.pools[0], commit)
    }

    #[test]
    fn a_commit_changes_a_pool_when_its_spec_changes_beyond_the_commit() {
        let mut b = Baseline::default();
        assert!(
            !b.unchanged("p", "c1", Some(&spec("1", "c1"))),
            "first seen"
        );
        assert!(
            b.unchanged("p", "c2", Some(&spec("1", "c2"))),
            "only the commit moved"
        );
        assert!(
            !b.unchanged("p", "c3", Some(&spec("2", "c3"))),
            "a new version"
        );
        // The answer on a commit stands for every pass on it.
        assert!(!b.unchanged("p", "c3", Some(&spec("2", "c3"))));
        assert!(b.unchanged("p", "c4", Some(&spec("2", "c4"))));
        // A pool held with no spec, then given one: a change.
        assert!(!b.unchanged("q", "c4", None));
        assert!(b.unchanged("q", "c5", None));
        assert!(!b.unchanged("q", "c6", Some(&spec("2", "c6"))));
    }

    #[test]
    fn a_cluster_is_unchanged_when_none_of_its_pools_changed() {
        use crate::report::State;
        let intent = ClusterIntent {
            pools: ["p", "q"]
                .iter()
                .map(|n| super::super::desired::PoolIntent {
                    name: n.to_string(),
                    spec: None,
                    pinned: ("general".into(), "1".into()),
                    waiting: None,
                    held: None,
                })
                .collect(),
            released: vec![],
        };
        let statuses = [
            CommitStatus::new("rota/c", State::Success, "all"),
            CommitStatus::new("rota/c/p", State::Success, "p"),
            CommitStatus::new("rota/c/q", State::Success, "q"),
        ];
        let both = BTreeSet::from(["p".to_string(), "q".to_string()]);
        let none = BTreeSet::new();
        let c = candidates(&statuses, &intent, &both, &none);
        let contexts: Vec<&str> = c.iter().map(|c| c.status.context.as_str()).collect();
        assert_eq!(contexts, ["rota/c/p", "rota/c/q", "rota/c"]);
        assert!(c.iter().all(|c| c.unchanged && !c.catching_up));
        let one = BTreeSet::from(["p".to_string()]);
        let c = candidates(&statuses, &intent, &one, &one);
        assert!(!c[2].unchanged && c[2].catching_up);
        assert!(c[0].unchanged && c[0].catching_up && !c[1].unchanged);
    }

    #[test]
    fn own_contexts_include_the_wave_for_its_writer_only() {
        assert!(own_context("rota/c", "c", None));
        assert!(own_context("rota/c/p", "c", None));
        assert!(!own_context("rota/cd/p", "c", None));
        assert!(!own_context("rota/wave/prod", "c", None));
        assert!(own_context("rota/wave/prod", "c", Some("prod")));
    }
}
