//! A proposal's last mile, shared by `rota images discover --open-pr` and `rota promote
//! --open-pr`: its branch force-pushed, and its one pull request opened or updated on the
//! forge (git alone: the branch, and a line that says so).

use std::path::Path;

use crate::report::StoreConfig;
use crate::report::pulls::{Proposal, open_or_update};

/// Where proposals go.
pub struct Where<'a> {
    pub repo: &'a Path,
    /// The remote the branch is pushed to.
    pub remote: &'a str,
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
    push_branch(to.repo, to.remote, branch)?;
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
        return Err(format!(
            "git push {remote} {branch} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
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
