//! Which statuses a forge is asked to hold, so that what an agent writes stays within a
//! forge's budget at fleet size. Pure: the agent hands in what it would report and what the
//! commit changed; the answer is the statuses worth a request, each with why.
//!
//! A forge bills every status: GitHub allows a token 5,000 requests an hour, and a commit
//! page with thousands of contexts is unreadable. Before, every commit moved every pool of
//! every cluster `pending` (the controller had not yet taken the new commit) → `success`,
//! also the pools the commit did not change: about 12 writes a cluster of 5 pools, 4,800 a
//! commit at 400 clusters. The rules:
//!
//! - a status is written only when its state or description changed since the last one
//!   this agent wrote *for that context* (on any commit), not per commit; a context the
//!   commit changes gets at least one status on it (its reviewers look there);
//! - a pool the commit does not change (its desired state is the one before, only the
//!   commit differs) costs nothing while its controller catches up with the new commit: its
//!   `waiting for the controller to take …` says nothing about the pool. So does its
//!   cluster when no pool of it changed;
//! - with [`Contexts::Waves`], per-pool and per-cluster contexts are not written at all: one
//!   `rota/wave/<name>` context per wave replaces them (`report::rollup`), on every commit
//!   (once each, then on change: the store compares with what the commit holds).
//!
//! The git-notes store keeps every status on every commit (the views read them there, and
//! a note is one write whatever it holds): this economy is for the forges only.

use std::collections::HashMap;

use super::status::{CommitStatus, State};

/// Which contexts an agent writes to a forge (`rota agent --status-contexts`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Contexts {
    /// `rota/<cluster>` and `rota/<cluster>/<pool>`: readable up to a few hundred clusters.
    #[default]
    Pools,
    /// `rota/wave/<name>` only, written by one agent per wave: for fleets where per-pool
    /// contexts would swamp the commit page and the token.
    Waves,
}

impl Contexts {
    pub fn parse(s: &str) -> Result<Contexts, String> {
        match s {
            "pools" => Ok(Contexts::Pools),
            "waves" => Ok(Contexts::Waves),
            _ => Err(format!(
                "{s:?} is not a status contexts setting: pools (rota/<cluster>/<pool>) or waves (rota/wave/<name>)"
            )),
        }
    }
}

/// One status the agent would report, with what the commit means for it.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub status: CommitStatus,
    /// The commit changes nothing this status is about: a pool whose desired state is the
    /// one it had before the commit, a cluster none of whose pools changed, came or went.
    pub unchanged: bool,
    /// The controller has not taken the commit's spec yet (the NodePoolRotation's status is
    /// about the generation before), or, for a cluster, one of its pools has not.
    pub catching_up: bool,
}

/// Why a status is written, or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Its state or description differs from the last one written for its context (or
    /// none was written by this process).
    Write,
    /// The same state and description as the last one written for its context.
    Same,
    /// The commit does not change it and its controller is catching up: nothing to say.
    CatchingUp,
    /// Per-pool and per-cluster contexts are replaced by the wave's ([`Contexts::Waves`]).
    RolledUp,
}

/// The last state and description this agent wrote per context, across commits, and on
/// which commit.
#[derive(Debug, Clone, Default)]
pub struct Written {
    last: HashMap<String, (String, State, String)>,
}

impl Written {
    /// Remembers `status` as written on `commit` (or queued: the budget delivers it).
    pub fn record(&mut self, commit: &str, status: &CommitStatus) {
        self.last.insert(
            status.context.clone(),
            (commit.to_string(), status.state, status.description.clone()),
        );
    }

    /// Said already: the same state and description, on this commit or, for a context the
    /// commit does not change, on any.
    fn same(&self, commit: &str, c: &Candidate) -> bool {
        self.last.get(&c.status.context).is_some_and(|(on, s, d)| {
            *s == c.status.state && *d == c.status.description && (c.unchanged || on == commit)
        })
    }
}

/// What to do with one candidate on `commit`.
pub fn decide(c: &Candidate, written: &Written, contexts: Contexts, commit: &str) -> Decision {
    let wave = c.status.context.starts_with("rota/wave/");
    if contexts == Contexts::Waves && !wave {
        return Decision::RolledUp;
    }
    // A wave's rollup goes on every commit (a handful a commit, what a required check reads);
    // the store compares with what that commit holds, at no request when it is the same.
    if wave {
        return Decision::Write;
    }
    if c.unchanged && c.catching_up {
        return Decision::CatchingUp;
    }
    if written.same(commit, c) {
        return Decision::Same;
    }
    Decision::Write
}

/// The candidates worth a write on `commit`, in the order given.
pub fn select<'a>(
    candidates: &'a [Candidate],
    written: &Written,
    contexts: Contexts,
    commit: &str,
) -> Vec<&'a CommitStatus> {
    candidates
        .iter()
        .filter(|c| decide(c, written, contexts, commit) == Decision::Write)
        .map(|c| &c.status)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const C0: &str = "c0";
    const C1: &str = "c1";

    fn cand(context: &str, state: State, d: &str, unchanged: bool, catching_up: bool) -> Candidate {
        Candidate {
            status: CommitStatus::new(context, state, d),
            unchanged,
            catching_up,
        }
    }

    #[test]
    fn a_status_is_written_exactly_when_its_state_or_description_changed() {
        let mut w = Written::default();
        let done = cand("rota/c/p", State::Success, "4/4 nodes on g@2", false, false);
        assert_eq!(decide(&done, &w, Contexts::Pools, C1), Decision::Write);
        w.record(C1, &done.status);
        assert_eq!(decide(&done, &w, Contexts::Pools, C1), Decision::Same);
        // Another description, same state: written.
        let other = cand("rota/c/p", State::Success, "5/5 nodes on g@2", false, false);
        assert_eq!(decide(&other, &w, Contexts::Pools, C1), Decision::Write);
        // Another state, same description: written.
        let failed = cand("rota/c/p", State::Failure, "4/4 nodes on g@2", false, false);
        assert_eq!(decide(&failed, &w, Contexts::Pools, C1), Decision::Write);
        // Another context with the same text is its own.
        let q = cand("rota/c/q", State::Success, "4/4 nodes on g@2", false, false);
        assert_eq!(decide(&q, &w, Contexts::Pools, C1), Decision::Write);
    }

    #[test]
    fn a_commit_that_changes_nothing_for_a_pool_costs_that_pool_nothing() {
        let mut w = Written::default();
        let before = cand("rota/c/p", State::Success, "4/4 nodes on g@2", false, false);
        w.record(C0, &before.status);
        // The next commit changes another pool: this one's controller catches up (pending,
        // "waiting for the controller"), then says the same as before.
        let catching = cand(
            "rota/c/p",
            State::Pending,
            "waiting for the controller to take g@2",
            true,
            true,
        );
        assert_eq!(
            decide(&catching, &w, Contexts::Pools, C1),
            Decision::CatchingUp
        );
        let after = cand("rota/c/p", State::Success, "4/4 nodes on g@2", true, false);
        assert_eq!(decide(&after, &w, Contexts::Pools, C1), Decision::Same);
        // A pool the commit changes reports its catching up: that is news.
        let changed = cand(
            "rota/c/p",
            State::Pending,
            "waiting for the controller to take g@3",
            false,
            true,
        );
        assert_eq!(decide(&changed, &w, Contexts::Pools, C1), Decision::Write);
        // A pool the commit changes says so on it, even when its controller took the commit
        // before the agent looked and the words are the ones of the commit before.
        let moved = cand("rota/c/p", State::Success, "4/4 nodes on g@2", false, false);
        assert_eq!(decide(&moved, &w, Contexts::Pools, C1), Decision::Write);
        w.record(C1, &moved.status);
        assert_eq!(decide(&moved, &w, Contexts::Pools, C1), Decision::Same);
        // An unchanged pool that fails later is written, whatever the commit.
        let fails = cand("rota/c/p", State::Failure, "failed: gate", true, false);
        assert_eq!(decide(&fails, &w, Contexts::Pools, C1), Decision::Write);
    }

    #[test]
    fn waves_replace_per_pool_and_per_cluster_contexts() {
        let w = Written::default();
        let all = [
            cand("rota/c", State::Success, "all pools", false, false),
            cand("rota/c/p", State::Success, "4/4", false, false),
            cand(
                "rota/wave/prod",
                State::Pending,
                "1/2 clusters",
                false,
                false,
            ),
        ];
        let picked: Vec<&str> = select(&all, &w, Contexts::Waves, C1)
            .iter()
            .map(|s| s.context.as_str())
            .collect();
        assert_eq!(picked, ["rota/wave/prod"]);
        let picked = select(&all, &w, Contexts::Pools, C1);
        assert_eq!(picked.len(), 3);
        // The rollup is judged per commit by the store, never skipped as the same as the
        // last one written on another commit.
        let mut w = Written::default();
        w.record(C0, &all[2].status);
        assert_eq!(decide(&all[2], &w, Contexts::Waves, C1), Decision::Write);
    }

    #[test]
    fn the_setting_reads_its_two_names_and_refuses_others() {
        assert_eq!(Contexts::parse("pools"), Ok(Contexts::Pools));
        assert_eq!(Contexts::parse("waves"), Ok(Contexts::Waves));
        assert!(Contexts::parse("wave").unwrap_err().contains("pools"));
    }
}
