//! Gitea (and Forgejo) commit statuses: `POST /api/v1/repos/{owner}/{repo}/statuses/{sha}`,
//! read back through the combined status `GET .../commits/{sha}/status`. Same states as
//! GitHub (Gitea adds `warning`, which rota never writes and reads as `failure`).

use async_trait::async_trait;
use serde::Deserialize;

use super::http::{ForgeClient, RateLimiter};
use super::statuses::{ForgeApi, ForgeStore};
use crate::report::{CommitStatus, Posted, ReportError, State};
use crate::source::Secret;

#[derive(Debug, Clone)]
pub struct GiteaConfig {
    /// `https://gitea.example.com/api/v1`.
    pub api_url: String,
    pub owner: String,
    pub repo: String,
    /// An access token with `write:repository`.
    pub token: Secret,
    pub requests_per_second: f64,
    /// Whose pull requests are rota's own (the login the token acts as); `None`: asked of the
    /// forge (`GET /user`) when first needed. See `forge::pulls`.
    pub pr_author: Option<String>,
}

pub struct GiteaApi {
    repo_path: String,
}

pub type GiteaStore = ForgeStore<GiteaApi>;

impl GiteaConfig {
    /// The API client, authenticated (statuses and pull requests share it).
    pub fn client(&self) -> Result<ForgeClient, ReportError> {
        ForgeClient::new(
            "gitea",
            &self.api_url,
            "authorization",
            &self.token,
            |t| format!("token {t}"),
            RateLimiter::new(10, self.requests_per_second),
        )
    }

    /// `/repos/{owner}/{repo}`.
    pub fn repo_path(&self) -> String {
        super::http::repo_path(&self.owner, &self.repo)
    }
}

impl GiteaStore {
    pub fn new(config: GiteaConfig) -> Result<Self, ReportError> {
        let api = GiteaApi {
            repo_path: config.repo_path(),
        };
        Ok(ForgeStore::from_parts(api, config.client()?))
    }
}

#[derive(Deserialize)]
struct Combined {
    #[serde(default)]
    statuses: Vec<Wire>,
}

#[derive(Deserialize)]
struct Wire {
    context: String,
    /// Gitea calls it `status` in answers and `state` in requests; accept either.
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    target_url: Option<String>,
}

const LIMIT: usize = 50;

fn state_from_wire(s: &str) -> State {
    match s {
        "pending" => State::Pending,
        "success" => State::Success,
        "error" => State::Error,
        _ => State::Failure,
    }
}

#[async_trait]
impl ForgeApi for GiteaApi {
    fn backend(&self) -> &'static str {
        "gitea"
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
                    "{}/commits/{sha}/status?limit={LIMIT}&page={page}",
                    self.repo_path
                ))
                .await?;
            let n = c.statuses.len();
            out.extend(c.statuses.into_iter().map(|w| CommitStatus {
                context: w.context,
                state: state_from_wire(w.status.or(w.state).as_deref().unwrap_or("")),
                description: w.description.unwrap_or_default(),
                target_url: w.target_url.filter(|u| !u.is_empty()),
                stop: None,
            }));
            if n < LIMIT {
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
        let body = serde_json::json!({
            "state": s.state.as_str(),
            "context": s.context,
            "description": s.description,
            "target_url": s.target_url.clone().unwrap_or_default(),
        });
        client
            .post_json(&format!("{}/statuses/{sha}", self.repo_path), &body)
            .await?;
        Ok(Posted::Created)
    }
}
