//! The forge a command talks to: GitHub, GitLab or Gitea (Forgejo), by flags or the
//! environment. `rota agent` posts its commit statuses there; `rota images discover
//! --open-pr` and `rota promote --open-pr` open their pull requests there. Tokens come from
//! a file or the environment and are never logged.

use std::path::PathBuf;

use clap::Args;

use super::secret::secret_from;
use crate::forge::StoreConfig;
use crate::forge::gitea::GiteaConfig;
use crate::forge::github::GitHubConfig;
use crate::forge::gitlab::GitLabConfig;
use crate::promotion::propose::current_branch;

#[derive(Args, Debug, Clone)]
pub struct ForgeArgs {
    /// The GitHub repository (`owner/repo`). `rota agent` posts its commit statuses there
    /// instead of git notes (the promotion records stay in git notes); `propose`, `promote
    /// --open-pr` and `images discover --open-pr` open or update their pull request there
    /// and post no status.
    #[arg(long, env = "ROTA_GITHUB_REPO", conflicts_with_all = ["gitlab_project", "gitea_repo"])]
    pub github_repo: Option<String>,
    /// File holding the GitHub token (the agent: "Commit statuses: write"; pull requests:
    /// "Pull requests: write"), else the environment variable ROTA_GITHUB_TOKEN. Never
    /// logged.
    #[arg(long, env = "ROTA_GITHUB_TOKEN_FILE")]
    pub github_token_file: Option<PathBuf>,
    /// The GitLab project (its numeric ID or path, `acme/platform/fleet`). `rota agent`
    /// posts its commit statuses there instead of git notes (the promotion records stay in
    /// git notes); `propose`, `promote --open-pr` and `images discover --open-pr` open or
    /// update their merge request there and post no status.
    #[arg(long, env = "ROTA_GITLAB_PROJECT", conflicts_with = "gitea_repo")]
    pub gitlab_project: Option<String>,
    /// File holding the GitLab token (`api` scope), else the environment variable
    /// ROTA_GITLAB_TOKEN. Never logged.
    #[arg(long, env = "ROTA_GITLAB_TOKEN_FILE")]
    pub gitlab_token_file: Option<PathBuf>,
    /// GitLab API base (`https://HOST/api/v4` for a self-managed GitLab).
    #[arg(
        long,
        env = "ROTA_GITLAB_API_URL",
        default_value = "https://gitlab.com/api/v4"
    )]
    pub gitlab_api_url: String,
    /// The Gitea or Forgejo repository (`owner/repo`; needs --gitea-api-url). `rota agent`
    /// posts its commit statuses there instead of git notes (the promotion records stay in
    /// git notes); `propose`, `promote --open-pr` and `images discover --open-pr` open or
    /// update their pull request there and post no status.
    #[arg(long, env = "ROTA_GITEA_REPO", requires = "gitea_api_url")]
    pub gitea_repo: Option<String>,
    /// Gitea API base (`https://gitea.example.com/api/v1`).
    #[arg(long, env = "ROTA_GITEA_API_URL")]
    pub gitea_api_url: Option<String>,
    /// File holding the Gitea token (`write:repository`), else the environment variable
    /// ROTA_GITEA_TOKEN. Never logged.
    #[arg(long, env = "ROTA_GITEA_TOKEN_FILE")]
    pub gitea_token_file: Option<PathBuf>,
    /// GitHub API base (`https://HOST/api/v3` for GitHub Enterprise Server).
    #[arg(
        long,
        env = "ROTA_GITHUB_API_URL",
        default_value = "https://api.github.com"
    )]
    pub github_api_url: String,
    /// Whose pull requests are rota's own: the forge login its token acts as. A proposal
    /// updates, and a revert counts as declined, only a pull request of its branch, from the
    /// configured repository (not a fork) and by this author. Default: asked of the forge once
    /// (`GET /user`); set it for a token that cannot read its own user (a GitHub App's
    /// installation token: `APP-NAME[bot]`).
    #[arg(long, env = "ROTA_FORGE_USER")]
    pub forge_user: Option<String>,
}

impl ForgeArgs {
    /// The forge these flags name, with its token; `None`: no forge (git alone).
    pub fn store_config(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<StoreConfig>, String> {
        let token = |file: &Option<PathBuf>, var: &str, flag: &str| {
            secret_from(file.as_deref(), var, env)?.ok_or_else(|| {
                format!(
                    "{flag} needs a token: {flag}-token-file FILE or the environment variable {var}"
                )
            })
        };
        let owner_repo = |flag: &str, full: &str| -> Result<(String, String), String> {
            match full.split_once('/') {
                Some((o, r)) if !o.is_empty() && !r.is_empty() && !r.contains('/') => {
                    Ok((o.to_string(), r.to_string()))
                }
                _ => Err(format!("{flag} must be owner/repo, got {full:?}")),
            }
        };
        if let Some(full) = &self.github_repo {
            let (owner, repo) = owner_repo("--github-repo", full)?;
            let mut gh = GitHubConfig::new(
                &owner,
                &repo,
                token(&self.github_token_file, "ROTA_GITHUB_TOKEN", "--github")?,
            );
            gh.api_url = self.github_api_url.clone();
            gh.pr_author = self.forge_user.clone();
            return Ok(Some(StoreConfig::GitHub(gh)));
        }
        if let Some(project) = &self.gitlab_project {
            if project.is_empty() {
                return Err("--gitlab-project must not be empty".into());
            }
            return Ok(Some(StoreConfig::GitLab(GitLabConfig {
                api_url: self.gitlab_api_url.clone(),
                project: project.clone(),
                token: token(&self.gitlab_token_file, "ROTA_GITLAB_TOKEN", "--gitlab")?,
                requests_per_second: 1.0,
                pr_author: self.forge_user.clone(),
            })));
        }
        if let Some(full) = &self.gitea_repo {
            let (owner, repo) = owner_repo("--gitea-repo", full)?;
            let api_url = self
                .gitea_api_url
                .clone()
                .ok_or("--gitea-repo needs --gitea-api-url")?;
            return Ok(Some(StoreConfig::Gitea(GiteaConfig {
                api_url,
                owner,
                repo,
                token: token(&self.gitea_token_file, "ROTA_GITEA_TOKEN", "--gitea")?,
                requests_per_second: 1.0,
                pr_author: self.forge_user.clone(),
            })));
        }
        Ok(None)
    }
}

/// Where `--open-pr` proposes: the remote, the base branch and the forge.
#[derive(Args, Debug, Clone)]
pub struct ProposeArgs {
    /// The remote the proposal branch is pushed to.
    #[arg(long, default_value = "origin", requires = "open_pr")]
    pub remote: String,
    /// The branch the pull request goes into (default: the branch HEAD is on).
    #[arg(long = "base-branch", requires = "open_pr")]
    pub base_branch: Option<String>,
    #[command(flatten)]
    pub forge: ForgeArgs,
}

impl ProposeArgs {
    /// The forge (from flags or the environment) and the base branch, for a repo at `repo`.
    pub fn resolve(&self, repo: &std::path::Path) -> Result<(Option<StoreConfig>, String), String> {
        let forge = self.forge.store_config(&|k| std::env::var(k).ok())?;
        let base = match &self.base_branch {
            Some(b) => b.clone(),
            None => current_branch(repo)?,
        };
        Ok((forge, base))
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// What `rota <path> --help` says about `flag`.
    fn help_of(path: &[&str], flag: &str) -> String {
        let mut cmd = crate::cli::Cli::command();
        cmd.build();
        let mut c = &cmd;
        for name in path {
            c = c
                .find_subcommand(name)
                .unwrap_or_else(|| panic!("no subcommand {name}"));
        }
        let arg = c
            .get_arguments()
            .find(|a| a.get_long() == Some(flag))
            .unwrap_or_else(|| panic!("rota {path:?} has no --{flag}"));
        arg.get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default()
    }

    /// The commands that open pull requests say so of the forge flags, and none of them
    /// claims they post commit statuses (only the agent does).
    #[test]
    fn the_forge_flags_say_what_each_command_does_with_them() {
        for path in [
            &["propose"][..],
            &["promote"][..],
            &["images", "discover"][..],
            &["agent"][..],
        ] {
            for flag in ["github-repo", "gitlab-project", "gitea-repo"] {
                let h = help_of(path, flag);
                assert!(
                    !h.starts_with("Post statuses"),
                    "rota {path:?} --{flag}: {h}"
                );
                assert!(
                    h.contains("`rota agent` posts its commit statuses there"),
                    "rota {path:?} --{flag}: {h}"
                );
                assert!(
                    h.contains("post no status") && h.contains("request there"),
                    "rota {path:?} --{flag}: {h}"
                );
            }
        }
    }
}
