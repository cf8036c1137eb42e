//! Committing an edited fleet file: the commit that a promotion, a revert or a discovered
//! version is, built from the parent's tree with git2 (no checkout needed, so a bare repo
//! works too). The edit itself is the core's fleet-file editor ([`rota_core::edit`]).

use std::path::Path;

use git2::{Oid, Repository};

/// Where the new commit goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Create this branch at the new commit (for a pull request).
    NewBranch(String),
    /// Advance the branch HEAD is on (its tip must be the parent); in a repo with a work
    /// tree, the edited file is checked out too (refused if it has local changes).
    CurrentBranch,
    /// Create this branch, or move it if it exists, to the new commit: a proposal's branch
    /// (`--open-pr`), rewritten on each run from the current base and force-pushed.
    ProposalBranch(String),
}

/// Commits `text` as `path` (relative to the repo root) on top of `parent`, then moves
/// `target`. Returns the new commit and the branch it is on.
pub fn commit_file(
    repo_path: &Path,
    parent: &str,
    path: &str,
    text: &str,
    message: &str,
    target: &Target,
) -> Result<(Oid, String), String> {
    let repo = Repository::open(repo_path).map_err(|e| {
        format!(
            "{}: not a git repository: {}",
            repo_path.display(),
            e.message()
        )
    })?;
    let parent = repo
        .revparse_single(parent)
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| format!("unknown revision {parent:?}: {}", e.message()))?;
    let branch = match target {
        Target::ProposalBranch(b) => {
            if repo
                .head()
                .ok()
                .and_then(|h| h.shorthand().ok().map(String::from))
                == Some(b.clone())
            {
                return Err(format!("{b} is checked out: run from the base branch"));
            }
            b.clone()
        }
        Target::NewBranch(b) => {
            if repo.find_branch(b, git2::BranchType::Local).is_ok() {
                return Err(format!("branch {b} already exists"));
            }
            b.clone()
        }
        Target::CurrentBranch => {
            let head = repo
                .head()
                .map_err(|e| format!("cannot read HEAD: {}", e.message()))?;
            if !head.is_branch() {
                return Err("HEAD is not on a branch: use --branch NAME".into());
            }
            if head.target() != Some(parent.id()) {
                return Err(format!(
                    "{} is not the tip of the current branch: use --branch NAME to commit on a new branch",
                    parent.id()
                ));
            }
            if !repo.is_bare() {
                let st = repo
                    .status_file(Path::new(path))
                    .map_err(|e| format!("{path}: {}", e.message()))?;
                if !st.is_empty() {
                    return Err(format!(
                        "{path} has uncommitted changes: commit or stash them first"
                    ));
                }
            }
            head.shorthand().unwrap_or("HEAD").to_string()
        }
    };
    let blob = repo
        .blob(text.as_bytes())
        .map_err(|e| format!("writing {path}: {}", e.message()))?;
    let parts: Vec<&str> = path.split('/').collect();
    let tree = replace_in_tree(
        &repo,
        Some(parent.tree().map_err(|e| e.message().to_string())?),
        &parts,
        blob,
    )?;
    let tree = repo.find_tree(tree).map_err(|e| e.message().to_string())?;
    let sig = repo
        .signature()
        .or_else(|_| git2::Signature::now("rota", "rota@localhost"))
        .map_err(|e| e.message().to_string())?;
    let refname = format!("refs/heads/{branch}");
    let id = repo
        .commit(None, &sig, &sig, message, &tree, &[&parent])
        .map_err(|e| format!("writing the commit: {}", e.message()))?;
    repo.reference(
        &refname,
        id,
        matches!(target, Target::CurrentBranch | Target::ProposalBranch(_)),
        "rota",
    )
    .map_err(|e| format!("moving {refname}: {}", e.message()))?;
    if *target == Target::CurrentBranch && !repo.is_bare() {
        let mut co = git2::build::CheckoutBuilder::new();
        co.force().path(path);
        repo.checkout_head(Some(&mut co))
            .map_err(|e| format!("checking out {path}: {}", e.message()))?;
    }
    Ok((id, branch))
}

fn replace_in_tree(
    repo: &Repository,
    tree: Option<git2::Tree<'_>>,
    parts: &[&str],
    blob: Oid,
) -> Result<Oid, String> {
    let mut b = repo
        .treebuilder(tree.as_ref())
        .map_err(|e| e.message().to_string())?;
    if parts.len() == 1 {
        b.insert(parts[0], blob, 0o100644)
            .map_err(|e| e.message().to_string())?;
    } else {
        let sub = tree
            .as_ref()
            .and_then(|t| t.get_name(parts[0]))
            .and_then(|e| repo.find_tree(e.id()).ok());
        let id = replace_in_tree(repo, sub, &parts[1..], blob)?;
        b.insert(parts[0], id, 0o040000)
            .map_err(|e| e.message().to_string())?;
    }
    b.write().map_err(|e| e.message().to_string())
}
