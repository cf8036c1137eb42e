//! The promotion commit: a wave's pins moved to what the wave before it runs, once the guard
//! allows, its message listing the guard's evidence. Written by `rota promote` (on the
//! current branch, a new branch, or `rota/promote/<wave>` for a pull request) and by `rota
//! propose` on its schedule; [`propose`] pushes it and opens (or updates) its pull request.

use std::path::Path;

use rota_core::edit::{FleetEditor, PinChange};
use rota_core::waves::GuardDecision;

use super::pin::{Target, commit_file};
use super::propose::Where;
use super::{PinCheck, describe};

/// The fleet a promotion is written from.
pub struct At<'a> {
    pub repo: &'a Path,
    /// The commit the promotion's parent is.
    pub rev: &'a str,
    /// The fleet's folder in the repo.
    pub subdir: Option<&'a Path>,
}

/// The branch a wave's promotion is proposed on.
pub fn branch(wave: &str) -> String {
    format!("rota/promote/{wave}")
}

/// Writes the promotion commit for `checks` (all allowed, all of `wave`) onto `target`:
/// returns the commit, its branch and its title. The edited fleet must load and pin exactly
/// what was asked, else nothing is written.
pub fn write(
    at: &At<'_>,
    wave: &str,
    checks: &[PinCheck],
    target: &Target,
) -> Result<(git2::Oid, String, String), String> {
    let mut changes = Vec::new();
    for c in checks {
        let Some(from) = &c.from else {
            return Err(format!(
                "wave {wave} does not pin channel {} yet; add `{}: \"{}\"` to its images by hand",
                c.channel, c.channel, c.to
            ));
        };
        changes.push(PinChange {
            channel: c.channel.clone(),
            from: from.clone(),
            to: c.to.clone(),
        });
    }
    let title = format!(
        "promote wave {wave}: {}",
        changes
            .iter()
            .map(|c| format!("{} {} → {}", c.channel, c.from, c.to))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let (id, branch) = commit_pins(at, wave, &changes, "promotion", target, |commit| {
        let mut message = format!(
            "{title}\n\nThe promotion guard allows it, from the agents' records (git notes) on {}:\n",
            &commit[..12]
        );
        for c in checks {
            if let GuardDecision::Allowed { reason } = &c.decision {
                message += &format!("\n{}@{}: {reason}\n", c.channel, c.to);
            }
            for e in &c.evidence {
                message += &format!("- {e}\n");
            }
        }
        message += "\nWritten by rota promote.\n";
        message
    })?;
    Ok((id, branch, title))
}

/// Commits `changes` to wave `wave`'s pins on top of `at.rev` and moves `target` (what
/// promotions and reverts share): the edited fleet must load and pin exactly what was asked,
/// else nothing is written (`what` names the change in that error). `message` is given the
/// parent commit's ID. Returns the commit and its branch.
pub(super) fn commit_pins(
    at: &At<'_>,
    wave: &str,
    changes: &[PinChange],
    what: &str,
    target: &Target,
    message: impl FnOnce(&str) -> String,
) -> Result<(git2::Oid, String), String> {
    let (files, _, commit) =
        crate::source::read::read_git(at.repo, at.rev, at.subdir).map_err(|d| d.to_string())?;
    let mut editor = FleetEditor::new(&files);
    let path = editor.move_pins(wave, changes)?;
    let fleet = editor
        .load()
        .map_err(|d| format!("the {what} would make the fleet invalid: {d}"))?;
    let pins = fleet
        .waves()
        .iter()
        .find(|w| w.name == wave)
        .map(|w| w.images.clone())
        .unwrap_or_default();
    for c in changes {
        if pins.get(&c.channel) != Some(&c.to) {
            return Err(format!(
                "editing {path} did not pin {}@{} in wave {wave}",
                c.channel, c.to
            ));
        }
    }
    let message = message(&commit);
    let full_path = match at.subdir {
        Some(d) if !d.as_os_str().is_empty() && d != Path::new(".") => {
            format!("{}/{path}", d.display().to_string().trim_end_matches('/'))
        }
        _ => path,
    };
    let text = editor.edited().map(|(_, t)| t).unwrap_or_default();
    commit_file(at.repo, &commit, &full_path, text, &message, target)
}

/// The promotion on branch `rota/promote/<wave>` (rewritten from `at.rev`), pushed, and its
/// pull request opened or updated; the body is the summary of the change, the guard's
/// evidence and, while it fits, `rota diff --format markdown` (see `promotion::body`).
pub async fn propose(
    at: &At<'_>,
    wave: &str,
    checks: &[PinCheck],
    to: &Where<'_>,
) -> Result<String, String> {
    let target = Target::ProposalBranch(branch(wave));
    let (id, branch, title) = write(at, wave, checks, &target)?;
    let before =
        crate::source::read::load_git_at(at.repo, at.rev, at.subdir).map_err(|d| d.to_string())?;
    let after = crate::source::read::load_git_at(at.repo, &id.to_string(), at.subdir)
        .map_err(|d| d.to_string())?;
    let mut evidence = String::new();
    for c in checks {
        evidence += &format!("- {}\n", describe(c));
    }
    super::body::propose_change(to, &branch, &title, &evidence, &before, &after).await
}
