//! Proposals as pull requests: what `rota images discover --open-pr` and `rota promote
//! --open-pr` open on the forge the statuses go to. One pull request per head branch: when
//! one is open for it, its title and body are updated instead of opening a second.
//!
//! | forge | find the open one | update | open |
//! |---|---|---|---|
//! | GitHub | `GET /repos/{o}/{r}/pulls?state=open&head={o}:{branch}` | `PATCH /repos/{o}/{r}/pulls/{number}` | `POST /repos/{o}/{r}/pulls` |
//! | GitLab | `GET /projects/{id}/merge_requests?state=opened&source_branch={branch}` | `PUT /projects/{id}/merge_requests/{iid}` | `POST /projects/{id}/merge_requests` |
//! | Gitea | `GET /repos/{o}/{r}/pulls?state=open`, page by page (the one whose `head.ref` is the branch) | `PATCH /repos/{o}/{r}/pulls/{index}` | `POST /repos/{o}/{r}/pulls` |
//!
//! A revert proposal also asks whether a person already closed its pull request
//! ([`closed_since`]): the same lists with `state=closed` (GitLab: closed without merging),
//! read for `closed_at`.

use http::Method;
use serde_json::{Value, json};

use super::http::{ForgeClient, path_segment};
use super::{ReportError, StoreConfig};

/// Gitea's page size for the list of open pull requests (its default maximum is 50), and
/// how many pages are read at most (2,500 open pull requests).
const GITEA_PAGE: usize = 50;
const GITEA_MAX_PAGES: usize = 50;

/// The pull request as the forge holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: u64,
    pub url: String,
    /// Opened now (else an open one was updated).
    pub opened: bool,
}

/// What to propose: `head` into `base`.
pub struct Proposal<'a> {
    pub head: &'a str,
    pub base: &'a str,
    pub title: &'a str,
    pub body: &'a str,
}

/// Opens the pull request of `p.head`, or updates the open one.
pub async fn open_or_update(
    config: &StoreConfig,
    p: &Proposal<'_>,
) -> Result<PullRequest, ReportError> {
    match config {
        StoreConfig::GitHub(c) => {
            let (client, repo) = (c.client()?, c.repo_path());
            let open: Value = client
                .get_json(&format!(
                    "{repo}/pulls?state=open&head={}:{}&per_page=100",
                    path_segment(&c.owner),
                    path_segment(p.head)
                ))
                .await?;
            pulls_api(&client, &repo, &open, p).await
        }
        StoreConfig::GitLab(c) => {
            let (client, project) = (c.client()?, c.project_path());
            let open: Value = client
                .get_json(&format!(
                    "{project}/merge_requests?state=opened&source_branch={}",
                    path_segment(p.head)
                ))
                .await?;
            let fields = json!({"title": p.title, "description": p.body});
            finish(&client, &open, "iid", "web_url", |n| {
                (Method::PUT, format!("{project}/merge_requests/{n}"), fields.clone())
            }, (
                format!("{project}/merge_requests"),
                json!({"source_branch": p.head, "target_branch": p.base, "title": p.title, "description": p.body}),
            ))
            .await
        }
        StoreConfig::Gitea(c) => {
            let (client, repo) = (c.client()?, c.repo_path());
            // Gitea filters by head in no list call every version has: every page of open
            // pull requests is read (a bound on pages, as ever) and the branch's picked here.
            let mine = gitea_pulls_of(&client, &format!("{repo}/pulls?state=open"), p.head).await?;
            pulls_api(&client, &repo, &mine, p).await
        }
        StoreConfig::GitNotes => Err(ReportError::Transport {
            backend: "git-notes",
            message: "no forge configured to open a pull request on".into(),
        }),
    }
}

/// A pull request the forge holds as closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedPull {
    pub number: u64,
    pub url: String,
    pub closed_at: chrono::DateTime<chrono::Utc>,
}

/// The newest pull request of `head` closed at or after `since`, if any: a person's answer to
/// a proposal that a proposer must not make again (closed unmerged: declined; merged: done).
pub async fn closed_since(
    config: &StoreConfig,
    head: &str,
    since: chrono::DateTime<chrono::Utc>,
) -> Result<Option<ClosedPull>, ReportError> {
    let (list, number_key, url_key) = match config {
        StoreConfig::GitHub(c) => {
            let (client, repo) = (c.client()?, c.repo_path());
            let closed: Value = client
                .get_json(&format!(
                    "{repo}/pulls?state=closed&head={}:{}&per_page=100",
                    path_segment(&c.owner),
                    path_segment(head)
                ))
                .await?;
            (closed, "number", "html_url")
        }
        StoreConfig::GitLab(c) => {
            let (client, project) = (c.client()?, c.project_path());
            let closed: Value = client
                .get_json(&format!(
                    "{project}/merge_requests?state=closed&source_branch={}",
                    path_segment(head)
                ))
                .await?;
            (closed, "iid", "web_url")
        }
        StoreConfig::Gitea(c) => {
            let (client, repo) = (c.client()?, c.repo_path());
            // As for the open ones: no head filter, every page read (the most recently
            // updated first) until the branch's shows up.
            let list = format!("{repo}/pulls?state=closed&sort=recentupdate");
            (
                gitea_pulls_of(&client, &list, head).await?,
                "number",
                "html_url",
            )
        }
        StoreConfig::GitNotes => return Ok(None),
    };
    Ok(list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|pr| {
            let closed_at = pr["closed_at"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())?
                .with_timezone(&chrono::Utc);
            Some(ClosedPull {
                number: pr[number_key].as_u64()?,
                url: pr[url_key].as_str().unwrap_or_default().to_string(),
                closed_at,
            })
        })
        .filter(|p| p.closed_at >= since)
        .max_by_key(|p| p.closed_at))
}

/// GitHub's and Gitea's pull requests (Gitea's API follows GitHub's): `PATCH
/// {repo}/pulls/{number}` with title and body, or `POST {repo}/pulls` with head and base too.
async fn pulls_api(
    client: &ForgeClient,
    repo: &str,
    open: &Value,
    p: &Proposal<'_>,
) -> Result<PullRequest, ReportError> {
    let fields = json!({"title": p.title, "body": p.body});
    finish(
        client,
        open,
        "number",
        "html_url",
        |n| (Method::PATCH, format!("{repo}/pulls/{n}"), fields.clone()),
        (
            format!("{repo}/pulls"),
            json!({"title": p.title, "head": p.head, "base": p.base, "body": p.body}),
        ),
    )
    .await
}

/// Updates the first of `open` (a list of pull requests) with `update(number)`, or opens one
/// with `create`; reads the number and the web address from the answer.
async fn finish(
    client: &ForgeClient,
    open: &Value,
    number_key: &str,
    url_key: &str,
    update: impl Fn(u64) -> (Method, String, Value),
    create: (String, Value),
) -> Result<PullRequest, ReportError> {
    let existing = open
        .as_array()
        .and_then(|a| a.first())
        .and_then(|pr| pr[number_key].as_u64());
    let (answer, opened) = match existing {
        Some(n) => {
            let (method, path, body) = update(n);
            (
                client.request_json(method, &path, Some(&body)).await?,
                false,
            )
        }
        None => (
            client
                .request_json(Method::POST, &create.0, Some(&create.1))
                .await?,
            true,
        ),
    };
    let number =
        answer[number_key]
            .as_u64()
            .or(existing)
            .ok_or_else(|| ReportError::Transport {
                backend: client.backend(),
                message: format!("the forge's answer names no {number_key}"),
            })?;
    Ok(PullRequest {
        number,
        url: answer[url_key].as_str().unwrap_or_default().to_string(),
        opened,
    })
}

/// Gitea's pull requests of `head` from the listing `list` (`{repo}/pulls?state=...`): pages
/// are read until the branch's show up or the listing ends, at most [`GITEA_MAX_PAGES`].
async fn gitea_pulls_of(
    client: &ForgeClient,
    list: &str,
    head: &str,
) -> Result<Value, ReportError> {
    let mut mine = Vec::new();
    for page in 1..=GITEA_MAX_PAGES {
        let got: Value = client
            .get_json(&format!("{list}&limit={GITEA_PAGE}&page={page}"))
            .await?;
        let got = got.as_array().cloned().unwrap_or_default();
        let n = got.len();
        mine.extend(
            got.into_iter()
                .filter(|pr| pr["head"]["ref"].as_str() == Some(head)),
        );
        if !mine.is_empty() || n < GITEA_PAGE {
            break;
        }
    }
    Ok(Value::Array(mine))
}
