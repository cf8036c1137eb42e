//! GitLab commit statuses: `POST /api/v4/projects/{id}/statuses/{sha}` (the status's `name`
//! is rota's context), read back with `GET .../repository/commits/{sha}/statuses` (latest per
//! name). GitLab has no `error` state: rota's `error` is stored as `failed`. GitLab refuses to
//! post a status in the state it already has ("Cannot transition status"), even with a new
//! description: rota treats that answer as "unchanged", so progress descriptions on GitLab
//! only change when the state does.

use async_trait::async_trait;
use serde::Deserialize;

use super::http::{ForgeClient, RateLimiter, path_segment};
use super::statuses::{ForgeApi, ForgeStore};
use crate::report::{CommitStatus, Posted, ReportError, State};
use crate::source::Secret;

#[derive(Debug, Clone)]
pub struct GitLabConfig {
    /// `https://gitlab.com/api/v4` or `https://HOST/api/v4`.
    pub api_url: String,
    /// The numeric project id or its path (`acme/platform/fleet`).
    pub project: String,
    /// A project or personal access token with the `api` scope.
    pub token: Secret,
    pub requests_per_second: f64,
    /// Whose pull requests are rota's own (the login the token acts as); `None`: asked of the
    /// forge (`GET /user`) when first needed. See `forge::pulls`.
    pub pr_author: Option<String>,
}

pub struct GitLabApi {
    project_path: String,
}

pub type GitLabStore = ForgeStore<GitLabApi>;

impl GitLabConfig {
    /// The API client, authenticated (statuses and merge requests share it).
    pub fn client(&self) -> Result<ForgeClient, ReportError> {
        ForgeClient::new(
            "gitlab",
            &self.api_url,
            "private-token",
            &self.token,
            |t| t.to_string(),
            RateLimiter::new(10, self.requests_per_second),
        )
    }

    /// `/projects/{id or url-encoded path}`.
    pub fn project_path(&self) -> String {
        format!("/projects/{}", path_segment(&self.project))
    }
}

impl GitLabStore {
    pub fn new(config: GitLabConfig) -> Result<Self, ReportError> {
        let api = GitLabApi {
            project_path: config.project_path(),
        };
        Ok(ForgeStore::from_parts(api, config.client()?))
    }
}

#[derive(Deserialize)]
struct Wire {
    name: String,
    status: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    target_url: Option<String>,
}

fn to_wire(s: State) -> &'static str {
    match s {
        State::Pending => "pending",
        State::Success => "success",
        State::Failure | State::Error => "failed",
    }
}

fn from_wire(s: &str) -> State {
    match s {
        "pending" | "running" | "created" | "waiting_for_resource" | "preparing" | "scheduled" => {
            State::Pending
        }
        "success" => State::Success,
        _ => State::Failure,
    }
}

const PER_PAGE: usize = 100;

#[async_trait]
impl ForgeApi for GitLabApi {
    fn backend(&self) -> &'static str {
        "gitlab"
    }

    async fn fetch(
        &self,
        client: &ForgeClient,
        sha: &str,
    ) -> Result<Vec<CommitStatus>, ReportError> {
        let mut out = Vec::new();
        for page in 1.. {
            let batch: Vec<Wire> = client
                .get_json(&format!(
                    "{}/repository/commits/{sha}/statuses?per_page={PER_PAGE}&page={page}",
                    self.project_path
                ))
                .await?;
            let n = batch.len();
            out.extend(batch.into_iter().map(|w| CommitStatus {
                context: w.name,
                state: from_wire(&w.status),
                description: w.description.unwrap_or_default(),
                target_url: w.target_url,
                stop: None,
            }));
            if n < PER_PAGE {
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
            "state": to_wire(s.state),
            "name": s.context,
            "description": s.description,
        });
        if let Some(url) = &s.target_url {
            body["target_url"] = url.clone().into();
        }
        match client
            .post_json(&format!("{}/statuses/{sha}", self.project_path), &body)
            .await
        {
            Ok(()) => Ok(Posted::Created),
            Err(ReportError::Http {
                status: 400,
                message,
                ..
            }) if message.contains("Cannot transition status") => Ok(Posted::Unchanged),
            Err(e) => Err(e),
        }
    }

    fn as_stored(&self, status: &CommitStatus) -> CommitStatus {
        let mut s = status.clone();
        s.state = from_wire(to_wire(s.state));
        s
    }
}
