//! The agent's writes to its status store on a pass (`impl Agent`): which notes a pass
//! reads for the wave's rollup, the statuses it writes and whether it writes the rollup.
//! What to write is decided in `reporting`; this file carries it out.

use std::collections::{BTreeMap, BTreeSet};

use crate::kube::crd::NodePoolRotation;
use crate::report::economy::{self, Candidate, Contexts};
use crate::report::rollup;
use crate::report::{CommitStatus, Posted, StatusStore};
use rota_core::waves::PoolRecord;

use super::desired::ClusterIntent;
use super::reporting::{FleetShape, candidates, catching_up, reported};
use super::state::{Agent, AgentError};

impl Agent {
    /// The notes a pass reads, with every cluster of the wave when this agent writes the
    /// wave's rollup (it counts their records).
    pub(super) fn rollup_notes(
        &self,
        mut needed: BTreeSet<String>,
        shape: &FleetShape,
    ) -> BTreeSet<String> {
        if self.config.report.contexts == Contexts::Waves
            && self.store.backend() != "git-notes"
            && shape.may_write_rollup(&self.config.cluster)
        {
            needed.extend(shape.wave_clusters());
        }
        needed
    }

    /// Writes the pass's statuses: all of them to git notes, the economy's pick to a forge.
    /// Pools first, the cluster's summary after, the wave's rollup last: a reader that sees
    /// the summary succeed must also see every pool's success.
    pub(super) async fn report(
        &mut self,
        commit: &str,
        shape: &FleetShape,
        statuses: &[CommitStatus],
        intent: &ClusterIntent,
        nprs: &BTreeMap<String, NodePoolRotation>,
        mut records: Vec<PoolRecord>,
    ) -> Result<(), AgentError> {
        // Our own records as this pass left them (the guard read them before it observed).
        records.retain(|r| r.cluster != self.config.cluster);
        records.extend(self.records.values().cloned());
        let ordered: Vec<&CommitStatus> = statuses.iter().skip(1).chain(statuses.first()).collect();
        if self.store.backend() == "git-notes" {
            for s in ordered {
                self.may_write()?;
                self.store.set(commit, s).await?;
            }
            return Ok(());
        }
        let contexts = self.config.report.contexts;
        self.store
            .set_writers(match contexts {
                Contexts::Pools => shape.clusters,
                Contexts::Waves => shape.waves,
            })
            .await;
        self.may_write()?;
        self.store.flush().await?;
        let unchanged: BTreeSet<String> = intent
            .pools
            .iter()
            .filter(|p| self.baseline.unchanged(&p.name, commit, p.spec.as_ref()))
            .map(|p| p.name.clone())
            .collect();
        let behind: BTreeSet<String> = intent
            .pools
            .iter()
            .filter(|p| catching_up(nprs.get(&p.name)))
            .map(|p| p.name.clone())
            .collect();
        let mut all = candidates(statuses, intent, &unchanged, &behind);
        if contexts == Contexts::Waves && self.writes_rollup(commit, shape).await? {
            self.baseline.wrote_rollup(commit);
            let held = intent.pools.iter().find_map(|p| p.waiting.as_deref());
            let status = rollup::wave_status(
                &shape.wave,
                &shape.wave_pools,
                &records,
                held,
                self.config.report.page_url.as_deref(),
            );
            all.push(Candidate {
                status,
                unchanged: false,
                catching_up: false,
            });
        }
        for s in economy::select(&all, &self.written, contexts, commit) {
            self.may_write()?;
            let posted = self.store.set(commit, s).await?;
            if matches!(
                posted,
                Posted::Created | Posted::Unchanged | Posted::Deferred
            ) {
                self.written.record(commit, s);
            }
        }
        Ok(())
    }
}

impl Agent {
    /// Whether this agent writes its wave's rollup on `commit` (`rollup::writer`): the
    /// candidates before it that reported the commit are read from the git notes, which
    /// every agent writes whatever its forge.
    async fn writes_rollup(
        &mut self,
        commit: &str,
        shape: &FleetShape,
    ) -> Result<bool, AgentError> {
        let me = self.config.cluster.clone();
        let candidates = shape.rollup_candidates();
        if !candidates.contains(&me.as_str()) {
            return Ok(false);
        }
        let waited = self.baseline.reporting_for(commit, self.clock.now());
        let before: Vec<&str> = candidates
            .iter()
            .copied()
            .take_while(|c| *c != me)
            .collect();
        if before.is_empty() {
            return Ok(true);
        }
        // Within the wait nobody but the first candidate writes: no notes to read yet.
        if waited < rollup::TAKEOVER_AFTER {
            return Ok(false);
        }
        let on_commit = self.notes.list(commit).await?;
        let reported = reported(before.iter().copied(), &on_commit);
        let writes = rollup::writer(candidates.iter().copied(), &me, &reported, waited);
        if writes {
            tracing::info!(cluster = %me, commit = %commit, wave = %shape.wave,
                silent = ?before, "writing the wave's rollup: the candidates before this cluster have not reported the commit");
        }
        Ok(writes)
    }
}
