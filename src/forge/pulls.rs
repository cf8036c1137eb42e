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
//!
//! A branch name is no identity: anyone who can fork the repo can open a pull request from a
//! branch named `rota/images/general`, and GitLab's `source_branch` and Gitea's `head.ref`
//! match forks too. So a pull request is rota's own only when all three hold:
//!
//! | forge | its branch | from the configured repository | by rota's user |
//! |---|---|---|---|
//! | GitHub | `head.ref` | `head.repo.full_name` is `owner/repo` | `user.login` |
//! | GitLab | `source_branch` | `source_project_id` is its `target_project_id` | `author.username` |
//! | Gitea | `head.ref` | `head.repo.full_name` is `owner/repo` | `user.login` |
//!
//! rota's user is `--forge-user` when given, else the token's own user, asked of the forge
//! once per process (`GET /user`: `login` on GitHub and Gitea, `username` on GitLab). A
//! fork's pull request is never updated and never counts as a person's answer; one from the
//! repository's own branch by someone else is not rewritten either (the error names it).
//!
//! Every listing is read strictly: an entry whose `number` (`iid`) is not a positive integer,
//! or whose branch, address or author is not of its type, is an error naming the field, never
//! "no pull request found, open a new one". Text from the forge (the address rota prints) is
//! passed through the one sanitiser.

use std::collections::HashMap;
use std::sync::Mutex;

use http::Method;
use serde_json::{Value, json};

use super::http::{ForgeClient, path_segment};
use super::{Forge, StoreConfig};
use crate::report::ReportError;
use rota_core::fleet::proposal::{GITEA_BODY_MAX, GITHUB_BODY_MAX, GITLAB_DESCRIPTION_MAX};

/// The most characters `forge` takes in a pull request body (no forge: the branch alone,
/// and a body kept to GitHub's size for whoever opens it by hand).
pub fn body_limit(forge: Option<&StoreConfig>) -> usize {
    forge
        .and_then(StoreConfig::forge)
        .map_or(GITHUB_BODY_MAX, Forge::body_limit)
}

/// The file's page on the forge's web side, derived from its API address (`api.github.com`
/// → `github.com`, `HOST/api/v3` → `HOST`, `HOST/api/v4` and `HOST/api/v1` → `HOST`).
pub fn web_link(forge: Option<&StoreConfig>, branch: &str, path: &str) -> Option<String> {
    let r = forge?.repo()?;
    let host = |suffix: &str| -> String {
        let api = r.api_url.trim_end_matches('/');
        api.strip_suffix(suffix).unwrap_or(api).to_string()
    };
    match r.forge {
        Forge::GitHub => {
            let web = if r.api_url.trim_end_matches('/') == "https://api.github.com" {
                "https://github.com".to_string()
            } else {
                host("/api/v3")
            };
            Some(format!("{web}/{}/{}/blob/{branch}/{path}", r.owner, r.name))
        }
        Forge::GitLab if !r.name.chars().all(|c| c.is_ascii_digit()) => Some(format!(
            "{}/{}/-/blob/{branch}/{path}",
            host("/api/v4"),
            r.name
        )),
        Forge::Gitea => Some(format!(
            "{}/{}/{}/src/branch/{branch}/{path}",
            host("/api/v1"),
            r.owner,
            r.name
        )),
        // A numeric GitLab project has no path to link to: the body names the file.
        Forge::GitLab => None,
    }
}

impl Forge {
    /// The most characters it takes in a pull request body.
    pub fn body_limit(self) -> usize {
        match self {
            Forge::GitHub => GITHUB_BODY_MAX,
            Forge::GitLab => GITLAB_DESCRIPTION_MAX,
            Forge::Gitea => GITEA_BODY_MAX,
        }
    }

    /// Where each field rota reads of its pull requests is.
    fn dialect(self) -> Dialect {
        match self {
            Forge::GitHub => GITHUB,
            Forge::GitLab => GITLAB,
            Forge::Gitea => GITEA,
        }
    }
}

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

/// One forge's pull-request dialect: where each field rota reads is.
#[derive(Clone, Copy)]
struct Dialect {
    number: &'static str,
    url: &'static str,
    /// The head branch (a JSON pointer).
    head_ref: &'static str,
    /// The author's login (a JSON pointer).
    author: &'static str,
    /// The user endpoint's login field.
    login: &'static str,
    /// A fork's pull request is told by its repository's `owner/repo` (GitHub, Gitea; else
    /// by `source_project_id`, GitLab).
    fork_by_name: bool,
    /// Its listing filters by head branch (Gitea's does not in every version: every page is
    /// read and the branch's picked here).
    lists_by_head: bool,
}

const GITHUB: Dialect = Dialect {
    number: "number",
    url: "html_url",
    head_ref: "/head/ref",
    author: "/user/login",
    login: "login",
    fork_by_name: true,
    lists_by_head: true,
};
const GITLAB: Dialect = Dialect {
    number: "iid",
    url: "web_url",
    head_ref: "/source_branch",
    author: "/author/username",
    login: "username",
    fork_by_name: false,
    lists_by_head: true,
};
const GITEA: Dialect = Dialect {
    lists_by_head: false,
    ..GITHUB
};

/// A forge's pull requests, as rota reads them: the API client, the dialect, the
/// repository rota proposes in, and rota's user if configured.
struct Pulls<'a> {
    client: ForgeClient,
    forge: Forge,
    /// The repository's API path (`/repos/{o}/{r}`, `/projects/{id}`) and its owner.
    path: String,
    owner: &'a str,
    dialect: Dialect,
    /// `owner/repo` (GitHub, Gitea); `None` on GitLab, where the list is the project's and a
    /// fork shows as `source_project_id` differing from `target_project_id`.
    repo: Option<String>,
    user: Option<&'a str>,
    api_url: &'a str,
    token_hint: u64,
}

/// One entry of a listing, read strictly.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listed {
    number: u64,
    url: String,
    head_ref: String,
    /// From the configured repository (not a fork).
    same_repo: bool,
    author: Option<String>,
    closed_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl<'a> Pulls<'a> {
    fn of(config: &'a StoreConfig) -> Result<Pulls<'a>, ReportError> {
        let hint = |t: &crate::source::Secret| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            t.expose().hash(&mut h);
            h.finish()
        };
        let (Some(repo), Some(client)) = (config.repo(), config.client()) else {
            return Err(ReportError::Transport {
                backend: "git-notes",
                message: "no forge configured to open a pull request on".into(),
            });
        };
        let dialect = repo.forge.dialect();
        Ok(Pulls {
            client: client?,
            forge: repo.forge,
            repo: dialect
                .fork_by_name
                .then(|| format!("{}/{}", repo.owner, repo.name)),
            path: repo.api_path,
            owner: repo.owner,
            dialect,
            user: repo.pr_author,
            api_url: repo.api_url,
            token_hint: hint(repo.token),
        })
    }

    /// The listing of open pull requests of `p.head`, and the update and the creation
    /// (method, path and body) of its pull request.
    fn open_calls(&self, p: &Proposal<'_>) -> (String, (Method, String, Value), (String, Value)) {
        let at = &self.path;
        match self.forge {
            Forge::GitHub => (
                format!(
                    "{at}/pulls?state=open&head={}:{}&per_page=100",
                    path_segment(self.owner),
                    path_segment(p.head)
                ),
                (
                    Method::PATCH,
                    format!("{at}/pulls"),
                    json!({"title": p.title, "body": p.body}),
                ),
                (
                    format!("{at}/pulls"),
                    json!({"title": p.title, "head": p.head, "base": p.base, "body": p.body}),
                ),
            ),
            Forge::GitLab => (
                format!(
                    "{at}/merge_requests?state=opened&source_branch={}",
                    path_segment(p.head)
                ),
                (
                    Method::PUT,
                    format!("{at}/merge_requests"),
                    json!({"title": p.title, "description": p.body}),
                ),
                (
                    format!("{at}/merge_requests"),
                    json!({"source_branch": p.head, "target_branch": p.base, "title": p.title, "description": p.body}),
                ),
            ),
            Forge::Gitea => (
                format!("{at}/pulls?state=open"),
                (
                    Method::PATCH,
                    format!("{at}/pulls"),
                    json!({"title": p.title, "body": p.body}),
                ),
                (
                    format!("{at}/pulls"),
                    json!({"title": p.title, "head": p.head, "base": p.base, "body": p.body}),
                ),
            ),
        }
    }

    /// The listing of closed pull requests of `head` (Gitea: every one, the most recently
    /// updated first, until the branch's shows up).
    fn closed_listing(&self, head: &str) -> String {
        let at = &self.path;
        match self.forge {
            Forge::GitHub => format!(
                "{at}/pulls?state=closed&head={}:{}&per_page=100",
                path_segment(self.owner),
                path_segment(head)
            ),
            Forge::GitLab => format!(
                "{at}/merge_requests?state=closed&source_branch={}",
                path_segment(head)
            ),
            Forge::Gitea => format!("{at}/pulls?state=closed&sort=recentupdate"),
        }
    }

    /// Every pull request of `head` in `listing`: one call, or Gitea's pages.
    async fn listed(&self, listing: &str, head: &str) -> Result<Vec<Listed>, ReportError> {
        if self.dialect.lists_by_head {
            let got: Value = self.client.get_json(listing).await?;
            self.read_list(&got, &format!("GET {listing}"))
        } else {
            gitea_pulls_of(self, listing, head).await
        }
    }

    /// An error about the forge's answer to `asked`, naming the field.
    fn malformed(&self, asked: &str, field: &str, what: &str) -> ReportError {
        ReportError::Transport {
            backend: self.client.backend(),
            message: format!("the forge's answer to {asked}: {field} {what}"),
        }
    }

    /// Every entry of a listing (`asked` names the request, for errors).
    fn read_list(&self, list: &Value, asked: &str) -> Result<Vec<Listed>, ReportError> {
        let Some(items) = list.as_array() else {
            return Err(self.malformed(
                asked,
                "the answer",
                &format!("is {}, not a list", kind(list)),
            ));
        };
        items
            .iter()
            .enumerate()
            .map(|(i, pr)| self.read_one(pr, &format!("[{i}]"), asked))
            .collect()
    }

    /// The number and the address of one pull request (a listing's entry, or the answer to
    /// an update or a creation); `at` is its place in the answer (`[3]`, or empty).
    fn number_and_url(
        &self,
        pr: &Value,
        at: &str,
        asked: &str,
    ) -> Result<(u64, String), ReportError> {
        let d = self.dialect;
        let number = match &pr[d.number] {
            Value::Number(n) if n.as_u64().is_some_and(|n| n > 0) => n.as_u64().unwrap_or(0),
            Value::Number(n) => {
                return Err(self.malformed(
                    asked,
                    &field(at, d.number),
                    &format!("is {n}, not a pull request number"),
                ));
            }
            v => {
                return Err(self.malformed(
                    asked,
                    &field(at, d.number),
                    &format!("is {}, not a pull request number", kind(v)),
                ));
            }
        };
        let url = self
            .string(pr.get(d.url), at, d.url, asked)?
            .unwrap_or_default();
        Ok((number, url))
    }

    /// A string field (sanitised), `None` when missing or null.
    fn string(
        &self,
        v: Option<&Value>,
        at: &str,
        ptr: &str,
        asked: &str,
    ) -> Result<Option<String>, ReportError> {
        match v {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(rota_core::sanitize::line(s).into_owned())),
            Some(v) => Err(self.malformed(
                asked,
                &field(at, ptr),
                &format!("is {}, not a string", kind(v)),
            )),
        }
    }

    /// One entry of a listing; `at` is its place in the answer (`[3]`).
    fn read_one(&self, pr: &Value, at: &str, asked: &str) -> Result<Listed, ReportError> {
        let d = self.dialect;
        let (number, url) = self.number_and_url(pr, at, asked)?;
        let string = |ptr: &str, v: Option<&Value>| self.string(v, at, ptr, asked);
        let field = |f: &str| field(at, f);
        let head_ref = string(d.head_ref, pr.pointer(d.head_ref))?
            .ok_or_else(|| self.malformed(asked, &field(d.head_ref), "is missing"))?;
        let author = string(d.author, pr.pointer(d.author))?;
        let same_repo = match &self.repo {
            Some(repo) => string("/head/repo/full_name", pr.pointer("/head/repo/full_name"))?
                .is_some_and(|r| r.eq_ignore_ascii_case(repo)),
            None => {
                let id = |k: &str| match &pr[k] {
                    Value::Number(n) => n
                        .as_u64()
                        .ok_or_else(|| self.malformed(asked, &field(k), "is not a project ID")),
                    v => Err(self.malformed(
                        asked,
                        &field(k),
                        &format!("is {}, not a project ID", kind(v)),
                    )),
                };
                id("source_project_id")? == id("target_project_id")?
            }
        };
        let closed_at = match string("closed_at", pr.get("closed_at"))? {
            None => None,
            Some(t) => Some(
                chrono::DateTime::parse_from_rfc3339(&t)
                    .map_err(|_| {
                        self.malformed(asked, &field("closed_at"), "is not an RFC 3339 time")
                    })?
                    .with_timezone(&chrono::Utc),
            ),
        };
        Ok(Listed {
            number,
            url,
            head_ref,
            same_repo,
            author,
            closed_at,
        })
    }

    /// rota's user on this forge: configured, else asked of the forge once per process.
    async fn user(&self) -> Result<String, ReportError> {
        if let Some(u) = self.user {
            return Ok(u.to_string());
        }
        static KNOWN: Mutex<Option<HashMap<(String, u64), String>>> = Mutex::new(None);
        let key = (self.api_url.to_string(), self.token_hint);
        if let Some(u) = KNOWN
            .lock()
            .ok()
            .and_then(|k| k.as_ref()?.get(&key).cloned())
        {
            return Ok(u);
        }
        let me: Value = self.client.get_json("/user").await.map_err(|e| {
            ReportError::Transport {
                backend: self.client.backend(),
                message: format!(
                    "cannot tell which pull requests are rota's own: GET /user failed ({e}); name \
                 the token's user with --forge-user"
                ),
            }
        })?;
        let login = match &me[self.dialect.login] {
            Value::String(s) if !s.is_empty() => s.clone(),
            v => {
                return Err(self.malformed(
                    "GET /user",
                    self.dialect.login,
                    &format!("is {}, not a login", kind(v)),
                ));
            }
        };
        if let Ok(mut k) = KNOWN.lock() {
            k.get_or_insert_with(HashMap::new)
                .insert(key, login.clone());
        }
        Ok(login)
    }

    /// The entries of `listed` that are rota's own pull requests of `head`; an entry of
    /// `head` from the repository itself by someone else is an error when `strict` (rota
    /// would otherwise fail to open its own, or rewrite theirs).
    async fn mine(
        &self,
        listed: Vec<Listed>,
        head: &str,
        strict: bool,
    ) -> Result<Vec<Listed>, ReportError> {
        let candidates: Vec<Listed> = listed
            .into_iter()
            .filter(|p| p.head_ref == head && p.same_repo)
            .collect();
        if candidates.is_empty() {
            return Ok(candidates);
        }
        let me = self.user().await?;
        let (mine, theirs): (Vec<Listed>, Vec<Listed>) = candidates.into_iter().partition(|p| {
            p.author
                .as_deref()
                .is_some_and(|a| a.eq_ignore_ascii_case(&me))
        });
        if strict
            && mine.is_empty()
            && let Some(p) = theirs.first()
        {
            return Err(ReportError::Transport {
                backend: self.client.backend(),
                message: format!(
                    "pull request #{} {} of branch {head} was opened by {}, not by rota's user \
                     {}: rota does not rewrite it; close it (or give rota's branch to rota)",
                    p.number,
                    p.url,
                    rota_core::sanitize::line(p.author.as_deref().unwrap_or("a deleted user")),
                    rota_core::sanitize::line(&me)
                ),
            });
        }
        Ok(mine)
    }
}

/// `at.field` for errors: `[3].head.ref`, `number`.
fn field(at: &str, f: &str) -> String {
    let f = f.trim_start_matches('/').replace('/', ".");
    if at.is_empty() {
        f
    } else {
        format!("{at}.{f}")
    }
}

/// A JSON value's kind, for an error that names a field without quoting the forge.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "missing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Opens the pull request of `p.head`, or updates the open one.
pub async fn open_or_update(
    config: &StoreConfig,
    p: &Proposal<'_>,
) -> Result<PullRequest, ReportError> {
    let pulls = Pulls::of(config)?;
    let (listing, update, create) = pulls.open_calls(p);
    let listed = pulls.listed(&listing, p.head).await?;
    let mine = pulls.mine(listed, p.head, true).await?;
    let (method, path, body, opened) = match mine.first() {
        Some(pr) => (
            update.0,
            format!("{}/{}", update.1, pr.number),
            update.2,
            false,
        ),
        None => (Method::POST, create.0, create.1, true),
    };
    let asked = format!("{method} {path}");
    let answer = pulls
        .client
        .request_json(method, &path, Some(&body))
        .await?;
    let (number, url) = pulls.number_and_url(&answer, "", &asked)?;
    Ok(PullRequest {
        number,
        url,
        opened,
    })
}

/// A pull request the forge holds as closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClosedPull {
    pub number: u64,
    pub url: String,
    pub closed_at: chrono::DateTime<chrono::Utc>,
}

/// The newest of rota's own pull requests of `head` closed at or after `since`, if any: a
/// person's answer to a proposal that a proposer must not make again (closed unmerged:
/// declined; merged: done). A fork's, or someone else's, is no answer to rota's proposal.
pub async fn closed_since(
    config: &StoreConfig,
    head: &str,
    since: chrono::DateTime<chrono::Utc>,
) -> Result<Option<ClosedPull>, ReportError> {
    if config.forge().is_none() {
        return Ok(None);
    }
    let pulls = Pulls::of(config)?;
    let listed = pulls.listed(&pulls.closed_listing(head), head).await?;
    Ok(pulls
        .mine(listed, head, false)
        .await?
        .into_iter()
        .filter_map(|p| {
            Some(ClosedPull {
                number: p.number,
                url: p.url,
                closed_at: p.closed_at?,
            })
        })
        .filter(|p| p.closed_at >= since)
        .max_by_key(|p| p.closed_at))
}

/// Gitea's pull requests of `head` from the listing `list` (`{repo}/pulls?state=...`): pages
/// are read until one of rota's own shows up or the listing ends, at most
/// [`GITEA_MAX_PAGES`]. A fork's pull request of the same branch name does not stop the
/// search: rota's may be on a later page.
async fn gitea_pulls_of(
    pulls: &Pulls<'_>,
    list: &str,
    head: &str,
) -> Result<Vec<Listed>, ReportError> {
    let mut found = Vec::new();
    for page in 1..=GITEA_MAX_PAGES {
        let path = format!("{list}&limit={GITEA_PAGE}&page={page}");
        let got: Value = pulls.client.get_json(&path).await?;
        let got = pulls.read_list(&got, &format!("GET {path}"))?;
        let n = got.len();
        found.extend(got.into_iter().filter(|p| p.head_ref == head));
        if found.iter().any(|p| p.same_repo) || n < GITEA_PAGE {
            break;
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forge::github::GitHubConfig;

    #[test]
    fn body_limits_and_links_per_forge() {
        let gh = StoreConfig::GitHub(GitHubConfig::new(
            "acme",
            "fleet",
            crate::source::Secret::new("t"),
        ));
        assert_eq!(
            web_link(Some(&gh), "rota/promote/main", ".rota/proposals/x.md").as_deref(),
            Some("https://github.com/acme/fleet/blob/rota/promote/main/.rota/proposals/x.md")
        );
        let mut ghes = GitHubConfig::new("acme", "fleet", crate::source::Secret::new("t"));
        ghes.api_url = "https://git.example.com/api/v3".into();
        assert_eq!(
            web_link(Some(&StoreConfig::GitHub(ghes)), "b", "p.md").as_deref(),
            Some("https://git.example.com/acme/fleet/blob/b/p.md")
        );
        assert_eq!(web_link(None, "b", "p.md"), None);
        assert_eq!(body_limit(Some(&gh)), 65_536);
        assert_eq!(body_limit(None), 65_536);
    }
}
