//! A proposal's last mile, shared by `rota images discover --open-pr` and `rota promote
//! --open-pr`: its branch force-pushed, and its one pull request opened or updated on the
//! forge (git alone: the branch, and a line that says so). The branch goes to a remote of
//! the user's clone through the git command line (their credential helpers and SSH setup
//! apply), or, for `rota propose` in a pod, straight to the repo's URL through libgit2 with
//! the agent's own credentials (the image carries no git).

use std::path::Path;

use crate::forge::StoreConfig;
use crate::forge::pulls::{Proposal, open_or_update};
use crate::report::notes::{PushTarget, push_refspec};

/// Where a proposal's branch is pushed.
#[derive(Clone, Copy)]
pub enum Remote<'a> {
    /// A remote of the clone, by name (`origin`), pushed to with `git push`.
    Named(&'a str),
    /// The repo's URL, pushed to with libgit2 and these credentials.
    Url(&'a PushTarget),
}

impl std::fmt::Display for Remote<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Remote::Named(n) => f.write_str(n),
            Remote::Url(t) => f.write_str(&crate::source::redact_url(&t.url)),
        }
    }
}

/// Where proposals go.
#[derive(Clone, Copy)]
pub struct Where<'a> {
    pub repo: &'a Path,
    /// The remote the branch is pushed to.
    pub remote: Remote<'a>,
    /// The branch the pull request goes into.
    pub base: &'a str,
    /// `None`: no forge, the branch is pushed and that is all.
    pub forge: Option<&'a StoreConfig>,
}

/// Pushes `branch` and opens its pull request (or updates the open one); says which.
pub async fn propose(
    to: &Where<'_>,
    branch: &str,
    title: &str,
    body: &str,
) -> Result<String, String> {
    match &to.remote {
        Remote::Named(remote) => push_branch(to.repo, remote, branch)?,
        Remote::Url(target) => {
            let repo = git2::Repository::open(to.repo)
                .map_err(|e| format!("{}: {}", to.repo.display(), e.message()))?;
            push_refspec(
                &repo,
                target,
                &format!("+refs/heads/{branch}:refs/heads/{branch}"),
            )
            .map_err(|e| {
                let e = crate::source::redact_urls_in(&e);
                format!("pushing {branch} to {}: {e}", to.remote)
            })?;
        }
    }
    let Some(forge) = to.forge else {
        return Ok(format!(
            "pushed {branch} to {}; no forge configured: open the pull request from it",
            to.remote
        ));
    };
    let pr = open_or_update(
        forge,
        &Proposal {
            head: branch,
            base: to.base,
            title,
            body,
        },
    )
    .await
    .map_err(|e| format!("the branch {branch} is pushed, the pull request failed: {e}"))?;
    Ok(format!(
        "{} pull request #{} {}",
        if pr.opened { "opened" } else { "updated" },
        pr.number,
        pr.url
    ))
}

/// `git push --force REMOTE BRANCH`: a proposal's branch, rewritten on each run. The git
/// command line is used so that the user's remotes, credential helpers and SSH setup apply.
pub fn push_branch(repo_path: &Path, remote: &str, branch: &str) -> Result<(), String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo_path)
        .args(["push", "--quiet", "--force", remote])
        .arg(format!("refs/heads/{branch}:refs/heads/{branch}"))
        .output()
        .map_err(|e| format!("cannot run git push: {e}"))?;
    if !out.status.success() {
        // The server's own lines (`remote: ...` from its hooks) are in git's stderr: made
        // safe to print before they reach a terminal or a log.
        return Err(format!(
            "git push {remote} {branch} failed: {}",
            rota_core::sanitize::text(String::from_utf8_lossy(&out.stderr).trim())
        ));
    }
    Ok(())
}

/// The branch HEAD is on: where pull requests go by default.
pub fn current_branch(repo: &Path) -> Result<String, String> {
    let r = git2::Repository::open(repo)
        .map_err(|e| format!("{}: not a git repository: {}", repo.display(), e.message()))?;
    let head = r
        .head()
        .map_err(|e| format!("cannot read HEAD: {}", e.message()))?;
    match head.shorthand() {
        Ok(b) if head.is_branch() => Ok(b.to_string()),
        _ => Err("HEAD is not on a branch: name the pull request's base with --base-branch".into()),
    }
}
