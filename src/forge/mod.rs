//! The forges, in one room: GitHub, GitLab and Gitea, each in its own file with what rota
//! does on it (its commit-status API through [`statuses::ForgeApi`], its configuration and
//! client), the pull requests rota opens on any of them and what each forge takes in one
//! (dialect, body limit, a file's web link: [`pulls`]), the one HTTP client they
//! share ([`http`]), and [`Forge`], the one name of a forge that the webhook receiver
//! (`crate::source::webhook`) and the configuration ([`StoreConfig::forge`]) both use.
//!
//! A new forge is a file here (its config, its `ForgeApi`), a variant of [`Forge`] and of
//! [`StoreConfig`], its pull-request dialect, body limit and web link in [`pulls`], its
//! webhook headers on [`Forge`], and its webhook signature in `source::webhook` (the one
//! part still outside this folder).

pub mod gitea;
pub mod github;
pub mod gitlab;
pub mod http;
pub mod pulls;
pub mod statuses;

use std::sync::Arc;

use crate::report::{GitNotesStore, ReportError, StatusStore};

/// A forge rota speaks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Forge {
    GitHub,
    GitLab,
    Gitea,
}

impl Forge {
    /// Its name in logs, metrics and status backends.
    pub fn name(self) -> &'static str {
        match self {
            Forge::GitHub => "github",
            Forge::GitLab => "gitlab",
            Forge::Gitea => "gitea",
        }
    }
}

/// What each forge's webhook deliveries say in their headers (their signature is checked by
/// the receiver, `crate::source::webhook`).
impl Forge {
    /// The forge that sent a delivery, by the headers it has (`has`: whether a header, by
    /// its lowercase name, is there). Gitea first: for compatibility it also sends
    /// X-GitHub-Event and X-GitHub-Delivery (and, on older versions, no
    /// X-Hub-Signature-256), never the other way round.
    pub fn of_webhook(has: impl Fn(&str) -> bool) -> Option<Forge> {
        if has("x-gitea-event") || has("x-gitea-signature") {
            Some(Forge::Gitea)
        } else if has("x-github-event") || has("x-hub-signature-256") {
            Some(Forge::GitHub)
        } else if has("x-gitlab-event") || has("x-gitlab-token") {
            Some(Forge::GitLab)
        } else {
            None
        }
    }

    /// The header naming a delivery's event.
    pub fn event_header(self) -> &'static str {
        match self {
            Forge::GitHub => "x-github-event",
            Forge::GitLab => "x-gitlab-event",
            Forge::Gitea => "x-gitea-event",
        }
    }

    /// The headers naming a delivery (the first one there counts). GitLab's Idempotency-Key
    /// (GitLab 17+) stays the same across retries of a delivery, which is exactly what
    /// deduplication needs; older GitLab: the event UUID.
    pub fn delivery_headers(self) -> &'static [&'static str] {
        match self {
            Forge::GitHub => &["x-github-delivery"],
            Forge::GitLab => &["idempotency-key", "x-gitlab-event-uuid"],
            Forge::Gitea => &["x-gitea-delivery"],
        }
    }

    /// The event a push is.
    pub fn push_event(self) -> &'static str {
        match self {
            Forge::GitLab => "Push Hook",
            Forge::GitHub | Forge::Gitea => "push",
        }
    }
}

/// Where statuses go, as configured (flags or environment of `rota agent`): the git notes or
/// a forge, which is also where pull requests are opened.
#[derive(Debug, Clone)]
pub enum StoreConfig {
    GitNotes,
    GitHub(github::GitHubConfig),
    GitLab(gitlab::GitLabConfig),
    Gitea(gitea::GiteaConfig),
}

impl StoreConfig {
    /// The forge configured (`None`: git notes).
    pub fn forge(&self) -> Option<Forge> {
        match self {
            StoreConfig::GitNotes => None,
            StoreConfig::GitHub(_) => Some(Forge::GitHub),
            StoreConfig::GitLab(_) => Some(Forge::GitLab),
            StoreConfig::Gitea(_) => Some(Forge::Gitea),
        }
    }
}

/// Builds the configured store. The git-notes store needs the fleet repo's mirror and is
/// passed in ready-made, because it is also where the promotion guard's records live.
pub fn store_from_config(
    config: &StoreConfig,
    notes: Arc<GitNotesStore>,
) -> Result<Arc<dyn StatusStore>, ReportError> {
    Ok(match config {
        StoreConfig::GitNotes => notes,
        StoreConfig::GitHub(c) => Arc::new(github::GitHubStore::new(c.clone())?),
        StoreConfig::GitLab(c) => Arc::new(gitlab::GitLabStore::new(c.clone())?),
        StoreConfig::Gitea(c) => Arc::new(gitea::GiteaStore::new(c.clone())?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factory_builds_each_backend_and_refuses_bad_urls() {
        let dir = tempfile::tempdir().unwrap();
        let notes = Arc::new(GitNotesStore::new(dir.path(), Some("c1"), None));
        let token = crate::source::Secret::new("t");
        let built = |c: StoreConfig| store_from_config(&c, Arc::clone(&notes)).map(|s| s.backend());
        assert_eq!(built(StoreConfig::GitNotes).unwrap(), "git-notes");
        let mut gh = github::GitHubConfig::new("acme", "fleet", token.clone());
        assert_eq!(built(StoreConfig::GitHub(gh.clone())).unwrap(), "github");
        let gl = gitlab::GitLabConfig {
            api_url: "https://gitlab.example.com/api/v4".into(),
            project: "acme/fleet".into(),
            token: token.clone(),
            requests_per_second: 1.0,
            pr_author: None,
        };
        assert_eq!(built(StoreConfig::GitLab(gl)).unwrap(), "gitlab");
        let gt = gitea::GiteaConfig {
            api_url: "https://gitea.example.com/api/v1".into(),
            owner: "acme".into(),
            repo: "fleet".into(),
            token,
            requests_per_second: 1.0,
            pr_author: None,
        };
        assert_eq!(built(StoreConfig::Gitea(gt)).unwrap(), "gitea");
        gh.api_url = "api.github.com".into();
        let err = built(StoreConfig::GitHub(gh)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "status store configuration: github: API URL api.github.com must start with https:// (or http:// for a local forge)"
        );
    }

    #[test]
    fn a_delivery_s_forge_is_read_from_its_headers_gitea_first() {
        let with = |names: &'static [&'static str]| move |h: &str| names.contains(&h);
        // Gitea sends GitHub's headers too: it is Gitea all the same.
        assert_eq!(
            Forge::of_webhook(with(&["x-github-event", "x-gitea-event"])),
            Some(Forge::Gitea)
        );
        assert_eq!(
            Forge::of_webhook(with(&["x-hub-signature-256"])),
            Some(Forge::GitHub)
        );
        assert_eq!(
            Forge::of_webhook(with(&["x-gitlab-token"])),
            Some(Forge::GitLab)
        );
        assert_eq!(Forge::of_webhook(with(&["x-other-event"])), None);
        assert_eq!(Forge::GitLab.push_event(), "Push Hook");
        assert_eq!(
            Forge::GitLab.delivery_headers(),
            ["idempotency-key", "x-gitlab-event-uuid"]
        );
    }

    #[test]
    fn each_configured_forge_names_itself_as_its_store_does() {
        let token = crate::source::Secret::new("t");
        let gh = StoreConfig::GitHub(github::GitHubConfig::new("acme", "fleet", token));
        let forge = gh.forge().unwrap();
        assert_eq!(forge, Forge::GitHub);
        let dir = tempfile::tempdir().unwrap();
        let notes = Arc::new(GitNotesStore::new(dir.path(), Some("c1"), None));
        assert_eq!(
            store_from_config(&gh, notes).unwrap().backend(),
            forge.name()
        );
        assert_eq!(StoreConfig::GitNotes.forge(), None);
    }
}
