//! Writing a promotion: the commit that moves a wave's pins (`spec.waves[k].images`) to new
//! versions, as `rota promote --wave NAME` makes it when the guard allows.
//!
//! The edit is textual, like a person's: only the version scalars change, comments, quoting
//! and layout stay. Where each pin is written comes from the YAML parser's positions; the
//! result is parsed again and must give exactly the wanted pins before anything is
//! committed. The commit is built from the parent's tree with git2 (no checkout needed, so a
//! bare repo works too).

use std::path::Path;

use git2::{Oid, Repository};

use rota_core::fleet::SourceFile;
use rota_core::fleet::yaml::{self, escape_token, offset};

/// One pin to move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinChange {
    pub channel: String,
    pub from: String,
    pub to: String,
}

/// Edits `files` (the fleet repo at some commit) so that wave `wave` pins each change's
/// channel to its `to`. Returns the path of the edited file and its new text.
pub fn edit_pins(
    files: &[SourceFile],
    wave: &str,
    changes: &[PinChange],
) -> Result<(String, String), String> {
    for f in files {
        let Ok(text) = std::str::from_utf8(&f.bytes) else {
            continue;
        };
        let Ok(docs) = yaml::parse(&f.path, text) else {
            continue;
        };
        for doc in docs {
            if doc.value.get("kind").and_then(|k| k.as_str()) != Some("Fleet") {
                continue;
            }
            let waves = doc.value["spec"]["waves"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let Some(k) = waves.iter().position(|w| w["name"].as_str() == Some(wave)) else {
                return Err(format!("{}: the Fleet has no wave named {wave}", f.path));
            };
            // Replace from the end of the file backwards: earlier offsets stay valid.
            let mut edits = Vec::new();
            for c in changes {
                let pointer = format!("/spec/waves/{k}/images/{}", escape_token(&c.channel));
                if waves[k]["images"].get(&c.channel).is_none() {
                    return Err(format!(
                        "{}: wave {wave} does not pin channel {} yet; add `{}: \"{}\"` to its images by hand",
                        f.path, c.channel, c.channel, c.to
                    ));
                }
                let pos = doc.positions.value(&pointer);
                let start = offset(text, pos.line, pos.column).ok_or_else(|| {
                    format!(
                        "{}:{}:{}: cannot locate the pin of {}",
                        f.path, pos.line, pos.column, c.channel
                    )
                })?;
                let (len, scalar, quote) = scalar_at(&text[start..]);
                if scalar != c.from {
                    return Err(format!(
                        "{}:{}:{}: expected the pin {} = {:?}, found {scalar:?}",
                        f.path, pos.line, pos.column, c.channel, c.from
                    ));
                }
                let q = quote.unwrap_or('"');
                edits.push((start, len, format!("{q}{}{q}", c.to)));
            }
            edits.sort_by_key(|e| std::cmp::Reverse(e.0));
            let mut out = text.to_string();
            for (start, len, with) in edits {
                out.replace_range(start..start + len, &with);
            }
            return Ok((f.path.clone(), out));
        }
    }
    Err("no Fleet document in the fleet repo".into())
}

/// The scalar at the start of `s`: (bytes it spans, its value, its quote character).
fn scalar_at(s: &str) -> (usize, String, Option<char>) {
    let first = s.chars().next();
    if let Some(q @ ('"' | '\'')) = first
        && let Some(end) = s[1..].find(q)
    {
        return (end + 2, s[1..end + 1].to_string(), Some(q));
    }
    let len = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        .unwrap_or(s.len());
    (len, s[..len].to_string(), None)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    const FLEET: &str = r#"# the fleet
kind: Fleet
spec:
  waves:
    - name: canary
      images: {general: "2026.11.2", gpu: '2026.11.1'}   # newest
    - name: main
      images:
        general: 2026.11.1   # plain
        gpu: '2026.10.3'
"#;

    fn change(c: &str, from: &str, to: &str) -> PinChange {
        PinChange {
            channel: c.into(),
            from: from.into(),
            to: to.into(),
        }
    }

    #[test]
    fn only_the_version_scalars_change() {
        let files = [SourceFile::new("fleet.yaml", FLEET)];
        let (path, text) = edit_pins(
            &files,
            "main",
            &[
                change("general", "2026.11.1", "2026.11.2"),
                change("gpu", "2026.10.3", "2026.11.1"),
            ],
        )
        .unwrap();
        assert_eq!(path, "fleet.yaml");
        assert_eq!(
            text,
            FLEET
                .replace(
                    "general: 2026.11.1   # plain",
                    "general: \"2026.11.2\"   # plain"
                )
                .replace("gpu: '2026.10.3'", "gpu: '2026.11.1'")
        );
        let (_, flow) =
            edit_pins(&files, "canary", &[change("gpu", "2026.11.1", "2026.11.9")]).unwrap();
        assert!(
            flow.contains(r#"{general: "2026.11.2", gpu: '2026.11.9'}   # newest"#),
            "{flow}"
        );
    }

    #[test]
    fn a_stale_or_missing_pin_is_refused() {
        let files = [SourceFile::new("fleet.yaml", FLEET)];
        let e = edit_pins(
            &files,
            "main",
            &[change("general", "2026.10.1", "2026.11.2")],
        )
        .unwrap_err();
        assert!(
            e.contains("expected the pin general = \"2026.10.1\""),
            "{e}"
        );
        let e = edit_pins(&files, "main", &[change("arm", "1", "2")]).unwrap_err();
        assert!(e.contains("does not pin channel arm"), "{e}");
        let e = edit_pins(&files, "nope", &[]).unwrap_err();
        assert!(e.contains("no wave named nope"), "{e}");
    }
}
