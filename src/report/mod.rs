//! Commit statuses: how each agent reports its clusters' and pools' progress on the fleet
//! commits it acts on. One small trait, [`StatusStore`], served by the git notes (the
//! default, [`notes`]) or a forge's commit-status API (`crate::forge`, which also builds the
//! configured store).
//! Every backend is idempotent: it compares with what is recorded and writes only on change,
//! so an agent can report its whole state on every loop.
//!
//! Contexts follow the contract: `rota/<cluster>` and `rota/<cluster>/<pool>`; descriptions
//! are at most 140 characters (the forges' limit), cut with `…` when longer.

pub mod budget;
pub mod economy;
pub mod evidence;
pub mod metered;
pub mod note_doc;
pub mod note_reader;
pub mod notes;
pub mod rollup;

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use rota_core::errors::{Class, Classified, Classify};

pub use notes::{GitNotesStore, NotesTips};

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

/// What a `set` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Posted {
    Created,
    /// The recorded status was already the same: nothing written.
    Unchanged,
    /// Past the write budget (`report::budget`): queued, written when the budget refills.
    Deferred,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum ReportError {
    #[error("{backend}: HTTP {status} from {url}: {message}")]
    Http {
        backend: &'static str,
        status: u16,
        url: String,
        message: String,
        /// From `Retry-After` or the rate-limit reset headers.
        retry_after: Option<Duration>,
    },
    #[error("{backend}: {message}")]
    Transport {
        backend: &'static str,
        message: String,
    },
    #[error("git notes {notes_ref}: {message}")]
    Git { notes_ref: String, message: String },
    #[error("invalid status: {0}")]
    Invalid(String),
    #[error("status store configuration: {0}")]
    Config(String),
}

impl Classify for ReportError {
    /// GitHub answers 403 to both "no permission" and "secondary rate limit"; only the latter
    /// comes with a time to wait.
    fn classify(&self) -> Classified {
        use crate::report::ReportError;
        let class = match self {
            ReportError::Http {
                status,
                retry_after,
                ..
            } => {
                if *status == 429 || *status >= 500 || (*status == 403 && retry_after.is_some()) {
                    Class::Transient
                } else {
                    Class::Stalled
                }
            }
            ReportError::Transport { .. } | ReportError::Git { .. } => Class::Transient,
            ReportError::Invalid(_) | ReportError::Config(_) => Class::Stalled,
        };
        Classified::new(class, self.reason())
    }
}

impl ReportError {
    /// Worth retrying later (network trouble, rate limits, server errors); the others need
    /// someone to fix a token or the configuration.
    pub fn is_transient(&self) -> bool {
        self.classify().class == Class::Transient
    }

    /// A stable, low-cardinality reason for metrics and events.
    pub fn reason(&self) -> &'static str {
        match self {
            ReportError::Http { status: 401, .. } => "Unauthorized",
            ReportError::Http { status: 429, .. } => "RateLimited",
            ReportError::Http {
                status: 403,
                retry_after: Some(_),
                ..
            } => "RateLimited",
            ReportError::Http { status: 403, .. } => "Forbidden",
            ReportError::Http { .. } => "HttpError",
            ReportError::Transport { .. } => "Unreachable",
            ReportError::Git { .. } => "GitNotesFailed",
            ReportError::Invalid(_) => "InvalidStatus",
            ReportError::Config(_) => "BadConfig",
        }
    }
}

/// Where statuses go. Implementations write only on change.
#[async_trait]
pub trait StatusStore: Send + Sync {
    /// A short name for logs: `git-notes`, `github`, `gitlab`, `gitea`.
    fn backend(&self) -> &'static str;

    /// The latest status of every context recorded on `commit` (full 40-hex id), sorted by
    /// context.
    async fn list(&self, commit: &str) -> Result<Vec<CommitStatus>, ReportError>;

    /// Records `status` on `commit` unless the same status is already recorded.
    async fn set(&self, commit: &str, status: &CommitStatus) -> Result<Posted, ReportError>;

    /// Writes what waits for budget, as far as it lasts (`report::budget`); stores without a
    /// budget write at once and have nothing to catch up.
    async fn flush(&self) -> Result<(), ReportError> {
        Ok(())
    }

    /// How many agents share the fleet's write budget now (`report::budget`).
    async fn set_writers(&self, _writers: usize) {}

    /// Statuses accepted but not written yet: what waits for a write budget
    /// (`report::budget`); 0 for a store that writes at once.
    async fn waiting(&self) -> usize {
        0
    }
}

pub(crate) fn validate(commit: &str, status: &CommitStatus) -> Result<(), ReportError> {
    if commit.len() != 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ReportError::Invalid(format!(
            "commit must be a full 40-hex id, got {commit:?}"
        )));
    }
    if !status.context.starts_with("rota/") {
        return Err(ReportError::Invalid(format!(
            "context {:?} is not under rota/",
            status.context
        )));
    }
    if status.description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(ReportError::Invalid(format!(
            "description of {} is longer than {MAX_DESCRIPTION_CHARS} characters",
            status.context
        )));
    }
    Ok(())
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

    #[test]
    fn bad_statuses_are_refused_before_any_request() {
        let ok = CommitStatus::new("rota/canary-use1", State::Pending, "waiting");
        let sha = "0123456789abcdef0123456789abcdef01234567";
        assert!(validate(sha, &ok).is_ok());
        assert!(validate("HEAD", &ok).is_err());
        let other = CommitStatus::new("ci/build", State::Success, "");
        assert!(
            validate(sha, &other)
                .unwrap_err()
                .to_string()
                .contains("not under rota/")
        );
    }
}
