//! A proposal's pull request body at fleet size, shared by the image, promotion and revert
//! proposals: composed by `rota_core::fleet::proposal` (summary per wave, evidence, what to
//! watch, the per-pool table while it fits) within the forge's limit; when the table does
//! not fit, it is committed on the proposal's branch as `.rota/proposals/<branch>.md` (a
//! hidden folder and not YAML: the fleet reader skips it) and the body links to it.

use rota_core::fleet::Fleet;
use rota_core::fleet::proposal::{
    self, BodyInput, GITEA_BODY_MAX, GITHUB_BODY_MAX, GITLAB_DESCRIPTION_MAX,
};

use super::pin::{Target, commit_file};
use super::propose::{Where, propose};
use crate::report::StoreConfig;

/// The most characters `forge` takes in a pull request body (no forge: the branch alone,
/// and a body kept to GitHub's size for whoever opens it by hand).
pub fn limit(forge: Option<&StoreConfig>) -> usize {
    match forge {
        Some(StoreConfig::GitLab(_)) => GITLAB_DESCRIPTION_MAX,
        Some(StoreConfig::Gitea(_)) => GITEA_BODY_MAX,
        Some(StoreConfig::GitHub(_)) | Some(StoreConfig::GitNotes) | None => GITHUB_BODY_MAX,
    }
}

/// Where a branch's full diff goes: `.rota/proposals/rota-promote-main.md` for
/// `rota/promote/main`.
pub fn diff_path(branch: &str) -> String {
    let name: String = branch
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!(".rota/proposals/{name}.md")
}

/// The file's page on the forge's web side, derived from its API address (`api.github.com`
/// → `github.com`, `HOST/api/v3` → `HOST`, `HOST/api/v4` and `HOST/api/v1` → `HOST`).
pub fn web_link(forge: Option<&StoreConfig>, branch: &str, path: &str) -> Option<String> {
    let host = |api: &str, suffix: &str| -> String {
        let api = api.trim_end_matches('/');
        api.strip_suffix(suffix).unwrap_or(api).to_string()
    };
    match forge? {
        StoreConfig::GitHub(g) => {
            let web = if g.api_url.trim_end_matches('/') == "https://api.github.com" {
                "https://github.com".to_string()
            } else {
                host(&g.api_url, "/api/v3")
            };
            Some(format!("{web}/{}/{}/blob/{branch}/{path}", g.owner, g.repo))
        }
        StoreConfig::GitLab(g) if !g.project.chars().all(|c| c.is_ascii_digit()) => Some(format!(
            "{}/{}/-/blob/{branch}/{path}",
            host(&g.api_url, "/api/v4"),
            g.project
        )),
        StoreConfig::Gitea(g) => Some(format!(
            "{}/{}/{}/src/branch/{branch}/{path}",
            host(&g.api_url, "/api/v1"),
            g.owner,
            g.repo
        )),
        // A numeric GitLab project has no path to link to: the body names the file.
        StoreConfig::GitLab(_) | StoreConfig::GitNotes => None,
    }
}

/// Pushes `branch` (already written: the change from `before` to `after`) and opens or
/// updates its pull request with a body that fits the forge; the full diff is committed on
/// the branch first when its table does not fit.
pub async fn propose_change(
    to: &Where<'_>,
    branch: &str,
    title: &str,
    evidence: &str,
    before: &Fleet,
    after: &Fleet,
) -> Result<String, String> {
    let diff = rota_core::fleet::diff::diff(before, after);
    let path = diff_path(branch);
    let link = web_link(to.forge, branch, &path);
    let body = proposal::compose(
        &diff,
        before,
        after,
        &BodyInput {
            evidence,
            full_diff_path: &path,
            full_diff_link: link.as_deref(),
        },
        limit(to.forge),
    );
    if body.table_in_file {
        let text = format!(
            "# {title}\n\nWritten by rota for the pull request of branch `{branch}`: every pool \
             this change moves, by wave (`rota diff` prints the same).\n\n{}",
            diff.render_markdown()
        );
        commit_file(
            to.repo,
            &format!("refs/heads/{branch}"),
            &path,
            &text,
            &format!(
                "rota: the per-pool diff of {branch}\n\nToo long for the pull request's body; linked from it.\n"
            ),
            &Target::ProposalBranch(branch.to_string()),
        )?;
    }
    propose(to, branch, title, &body.text).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::github::GitHubConfig;

    #[test]
    fn paths_and_links_per_forge() {
        assert_eq!(
            diff_path("rota/revert/main/general-2026.11.2"),
            ".rota/proposals/rota-revert-main-general-2026.11.2.md"
        );
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
        assert_eq!(limit(Some(&gh)), 65_536);
        assert_eq!(limit(None), 65_536);
    }
}
