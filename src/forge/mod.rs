//! The forges, in one room: GitHub, GitLab and Gitea, each in its own file with what rota
//! does on it (its commit-status API through [`statuses::ForgeApi`], its configuration and
//! client), the pull requests rota opens on any of them and what each forge takes in one
//! (dialect, body limit, a file's web link: [`pulls`]), the one HTTP client they
//! share ([`http`]), each forge's push webhook deliveries as the receiver
//! (`crate::source::webhook`) takes them ([`webhook`]: headers and signature), and [`Forge`],
//! the one name of a forge that the configuration ([`StoreConfig::forge`]) uses too.
//!
//! A new forge is a file here (its config, its `ForgeApi`), a variant of [`Forge`] and of
//! [`StoreConfig`], its pull-request dialect, body limit and web link in [`pulls`], and its
//! webhook headers and signature in [`webhook`].

pub mod gitea;
pub mod github;
pub mod gitlab;
pub mod http;
pub mod pulls;
pub mod statuses;
pub mod webhook;

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
        self.repo().map(|r| r.forge)
    }

    /// The configured forge's repository (`None`: git notes): the one place a configuration
    /// is read by its variant; what differs between forges past this point is asked of
    /// [`Forge`].
    pub fn repo(&self) -> Option<ForgeRepo<'_>> {
        let (forge, api_url, api_path, owner, name, pr_author, token) = match self {
            StoreConfig::GitNotes => return None,
            StoreConfig::GitHub(c) => {
                let path = c.repo_path();
                (
                    Forge::GitHub,
                    c.api_url.as_str(),
                    path,
                    c.owner.as_str(),
                    c.repo.as_str(),
                    &c.pr_author,
                    &c.token,
                )
            }
            StoreConfig::GitLab(c) => {
                let path = c.project_path();
                (
                    Forge::GitLab,
                    c.api_url.as_str(),
                    path,
                    "",
                    c.project.as_str(),
                    &c.pr_author,
                    &c.token,
                )
            }
            StoreConfig::Gitea(c) => {
                let path = c.repo_path();
                (
                    Forge::Gitea,
                    c.api_url.as_str(),
                    path,
                    c.owner.as_str(),
                    c.repo.as_str(),
                    &c.pr_author,
                    &c.token,
                )
            }
        };
        Some(ForgeRepo {
            forge,
            api_url,
            api_path,
            owner,
            name,
            pr_author: pr_author.as_deref(),
            token,
        })
    }

    /// The configured forge's API client, authenticated (statuses and pull requests share
    /// it); `None`: git notes.
    pub fn client(&self) -> Option<Result<http::ForgeClient, ReportError>> {
        match self {
            StoreConfig::GitNotes => None,
            StoreConfig::GitHub(c) => Some(c.client()),
            StoreConfig::GitLab(c) => Some(c.client()),
            StoreConfig::Gitea(c) => Some(c.client()),
        }
    }
}

/// A forge's repository as the configuration names it.
#[derive(Debug, Clone)]
pub struct ForgeRepo<'a> {
    pub forge: Forge,
    pub api_url: &'a str,
    /// Its API path: `/repos/{owner}/{repo}` (GitHub, Gitea), `/projects/{id}` (GitLab).
    pub api_path: String,
    /// Its owner (GitHub, Gitea; empty on GitLab, whose project names it).
    pub owner: &'a str,
    /// Its name (GitHub, Gitea), or the GitLab project as configured (a path or a number).
    pub name: &'a str,
    /// rota's user on the forge, when configured (`--forge-user`).
    pub pr_author: Option<&'a str>,
    pub token: &'a crate::source::Secret,
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
