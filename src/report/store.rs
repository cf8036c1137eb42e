//! Where statuses go ([`StatusStore`], served by the git notes or a forge's commit-status
//! API), what a write did ([`Posted`]) and how it fails ([`ReportError`], classified for
//! retries), and the checks every backend makes before it writes ([`validate`]). Every
//! backend implements it; it lives below them.

use std::time::Duration;

use async_trait::async_trait;

use rota_core::errors::{Class, Classified, Classify};

use super::status::{CommitStatus, MAX_DESCRIPTION_CHARS};

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

/// The checks every backend makes before any request: a full commit ID, a `rota/` context,
/// a description the forges accept.
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
    use crate::report::status::State;

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
