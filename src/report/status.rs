//! One commit status as rota reports it ([`CommitStatus`]: a context, a [`State`], a
//! description of at most [`MAX_DESCRIPTION_CHARS`] characters, the pool's stop note), the
//! contexts of a cluster and a pool. Every store, the notes documents and the rollups use
//! them; they live below all of them.

use serde::{Deserialize, Serialize};

/// The longest description the forges accept (GitHub and Gitea cut or reject longer ones).
pub const MAX_DESCRIPTION_CHARS: usize = 140;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Pending,
    Success,
    Failure,
    Error,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Pending => "pending",
            State::Success => "success",
            State::Failure => "failure",
            State::Error => "error",
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One status of one commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitStatus {
    /// `rota/<cluster>` or `rota/<cluster>/<pool>`.
    pub context: String,
    pub state: State,
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_url: Option<String>,
    /// The pool's stop note (`rotate::stop`), in full: the note documents carry it for the
    /// fleet views; forges get the description only (140 characters), which leads with
    /// the next step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<rota_core::rotate::stop::StopNote>,
}

impl CommitStatus {
    /// The same status carrying the pool's stop note.
    pub fn with_stop(mut self, stop: Option<rota_core::rotate::stop::StopNote>) -> Self {
        self.stop = stop;
        self
    }

    /// A status, its description cut to [`MAX_DESCRIPTION_CHARS`] characters.
    pub fn new(context: impl Into<String>, state: State, description: &str) -> Self {
        CommitStatus {
            context: context.into(),
            state,
            description: fit_description(description),
            target_url: None,
            stop: None,
        }
    }

    pub fn with_target_url(mut self, url: impl Into<String>) -> Self {
        self.target_url = Some(url.into());
        self
    }

    /// True when posting `self` over `recorded` would change nothing visible.
    pub fn same_as(&self, recorded: &CommitStatus) -> bool {
        self.context == recorded.context
            && self.state == recorded.state
            && self.description == recorded.description
            && self.target_url == recorded.target_url
    }
}

/// The status context of a cluster.
pub fn cluster_context(cluster: &str) -> String {
    format!("rota/{cluster}")
}

/// The status context of a pool.
pub fn pool_context(cluster: &str, pool: &str) -> String {
    format!("rota/{cluster}/{pool}")
}

/// Cuts a description to 140 characters (not bytes: `·` and `…` are one each).
pub fn fit_description(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() <= MAX_DESCRIPTION_CHARS {
        return s.to_string();
    }
    let mut cut: String = s.chars().take(MAX_DESCRIPTION_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_are_cut_at_140_characters() {
        let short = "batch 3/8 · 14/40 nodes on general@2026.11.2";
        assert_eq!(fit_description(short), short);
        let long = "é".repeat(200);
        let cut = fit_description(&long);
        assert_eq!(cut.chars().count(), 140);
        assert!(cut.ends_with('…'));
        let exact = "x".repeat(140);
        assert_eq!(fit_description(&exact), exact);
    }

    #[test]
    fn a_guard_wait_on_many_pools_fits_a_pending_status() {
        use rota_core::waves::{PoolRef, Wait};
        let pools: Vec<PoolRef> = (0..50)
            .map(|i| {
                PoolRef::new(
                    &format!("a-very-long-cluster-name-number-{i}"),
                    "general-purpose-pool",
                    "general",
                )
            })
            .collect();
        let w = Wait::Completion {
            wave: "canary".into(),
            pools,
        };
        let s = CommitStatus::new(
            "rota/c/p",
            State::Pending,
            &w.describe("general", "2026.11.2"),
        );
        assert!(s.description.chars().count() <= 140, "{}", s.description);
    }
}
