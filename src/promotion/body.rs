//! A proposal's pull request body at fleet size, shared by the image, promotion and revert
//! proposals: composed by `rota_core::fleet::proposal` (summary per wave, evidence, what to
//! watch, the per-pool table while it fits) within the forge's limit; when the table does
//! not fit, it is committed on the proposal's branch as `.rota/proposals/<branch>.md` (a
//! hidden folder and not YAML: the fleet reader skips it) and the body links to it.

use rota_core::fleet::Fleet;
use rota_core::fleet::proposal::{self, BodyInput};

use super::pin::{Target, commit_file};
use super::propose::{Where, propose};
use crate::forge::pulls::{body_limit, web_link};

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
        body_limit(to.forge),
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

    #[test]
    fn a_branch_s_diff_has_a_path_of_its_own() {
        assert_eq!(
            diff_path("rota/revert/main/general-2026.11.2"),
            ".rota/proposals/rota-revert-main-general-2026.11.2.md"
        );
    }
}
