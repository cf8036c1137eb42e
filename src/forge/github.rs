//! GitHub commit statuses (`POST /repos/{owner}/{repo}/statuses/{sha}`), read back through
//! the combined status (`GET /repos/{owner}/{repo}/commits/{sha}/status`, latest per
//! context). Works with GitHub Enterprise Server (`https://HOST/api/v3`). GitHub keeps at
//! most 1000 statuses per commit and context; posting only on change keeps rota far below.

use async_trait::async_trait;
use serde::Deserialize;

use super::http::{ForgeClient, RateLimiter};
use super::statuses::{ForgeApi, ForgeStore};
use crate::report::{CommitStatus, Posted, ReportError, State};
use crate::source::Secret;

#[derive(Debug, Clone)]
pub struct GitHubConfig {
    /// `https://api.github.com`, or `https://HOST/api/v3` for GitHub Enterprise Server.
    pub api_url: String,
    pub owner: String,
    pub repo: String,
    /// A token with `repo:status` (classic) or "Commit statuses: write" (fine-grained).
    pub token: Secret,
    /// Client-side limit, requests per second (GitHub allows about 1.4/s per token).
    pub requests_per_second: f64,
    /// GitHub keeps at most 1000 statuses per commit and context and rejects more.
    pub max_statuses_per_context: u32,
    /// Whose pull requests are rota's own (the login the token acts as); `None`: asked of the
    /// forge (`GET /user`) when first needed. See `forge::pulls`.
    pub pr_author: Option<String>,
}

impl GitHubConfig {
    pub fn new(owner: &str, repo: &str, token: Secret) -> Self {
        GitHubConfig {
            api_url: "https://api.github.com".into(),
            owner: owner.into(),
            repo: repo.into(),
            token,
            requests_per_second: 1.0,
            max_statuses_per_context: 1000,
            pr_author: None,
        }
    }
}

pub struct GitHubApi {
    repo_path: String,
    max_per_context: u32,
}

pub type GitHubStore = ForgeStore<GitHubApi>;

impl GitHubConfig {
    /// The API client, authenticated (statuses and pull requests share it).
    pub fn client(&self) -> Result<ForgeClient, ReportError> {
        ForgeClient::new(
            "github",
            &self.api_url,
            "authorization",
            &self.token,
            |t| format!("Bearer {t}"),
            RateLimiter::new(10, self.requests_per_second),
        )
    }

    /// `/repos/{owner}/{repo}`.
    pub fn repo_path(&self) -> String {
        super::http::repo_path(&self.owner, &self.repo)
    }
}

impl GitHubStore {
    pub fn new(config: GitHubConfig) -> Result<Self, ReportError> {
        let api = GitHubApi {
            repo_path: config.repo_path(),
            max_per_context: config.max_statuses_per_context,
        };
        Ok(ForgeStore::from_parts(api, config.client()?))
    }
}

#[derive(Deserialize)]
struct Combined {
    total_count: usize,
    statuses: Vec<Wire>,
}

#[derive(Deserialize)]
struct Wire {
    context: String,
    state: State,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    target_url: Option<String>,
}

const PER_PAGE: usize = 100;

#[async_trait]
impl ForgeApi for GitHubApi {
    fn backend(&self) -> &'static str {
        "github"
    }

    fn max_per_context(&self) -> Option<u32> {
        Some(self.max_per_context)
    }

    async fn fetch(
        &self,
        client: &ForgeClient,
        sha: &str,
    ) -> Result<Vec<CommitStatus>, ReportError> {
        let mut out = Vec::new();
        for page in 1.. {
            let c: Combined = client
                .get_json(&format!(
                    "{}/commits/{sha}/status?per_page={PER_PAGE}&page={page}",
                    self.repo_path
                ))
                .await?;
            let n = c.statuses.len();
            out.extend(c.statuses.into_iter().map(|w| CommitStatus {
                context: w.context,
                state: w.state,
                description: w.description.unwrap_or_default(),
                target_url: w.target_url,
                stop: None,
            }));
            if n < PER_PAGE || out.len() >= c.total_count {
                break;
            }
        }
        Ok(out)
    }

    async fn post(
        &self,
        client: &ForgeClient,
        sha: &str,
        s: &CommitStatus,
    ) -> Result<Posted, ReportError> {
        let mut body = serde_json::json!({
            "state": s.state.as_str(),
            "context": s.context,
            "description": s.description,
        });
        if let Some(url) = &s.target_url {
            body["target_url"] = url.clone().into();
        }
        client
            .post_json(&format!("{}/statuses/{sha}", self.repo_path), &body)
            .await?;
        Ok(Posted::Created)
    }
}
