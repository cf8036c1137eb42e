//! Revert proposals at the edge: what `waves::revert` decides from (each wave's pins with
//! their history in git, the agents' records in git notes), and what it proposes: the commit
//! that pins a wave back, on `rota/revert/<wave>/<channel>-<version>`, pushed, and its one
//! pull request opened or updated (git alone: the branch). Run by `rota propose` on its
//! schedule and by `rota promote --revert --wave W` by hand.
//!
//! The history is the branch's first-parent line (the commits that were in force, one after
//! the other), read back from the head until every pin's previous version is found, at most
//! [`HISTORY`] commits. A commit whose fleet does not load is skipped: it never was in force.
//! The records of each cluster are the newest of its notes on the commits since the pins
//! moved (an agent may not have reached the head yet), at most [`NOTES_DEPTH`] commits back.

use std::collections::BTreeSet;
use std::path::Path;

use chrono::{DateTime, Utc};
use git2::{Oid, Repository};

use super::Query;
use super::commit::{At, commit_pins};
use super::pin::{PinChange, Target};
use super::propose::Where;
use crate::report::GitNotesStore;
use rota_core::fleet::Fleet;
use rota_core::waves::{PinHistory, PoolRecord, Revert, RevertCheck, reverts, wave_views};

/// Commits of the first-parent history read at most for the pins' previous versions.
pub const HISTORY: usize = 2000;
/// Commits, back from the head, whose notes are read at most for a cluster's records.
pub const NOTES_DEPTH: usize = 200;

/// What each pin of `query.wave` (default: every wave) calls for, from the fleet at
/// `query.rev`, its history and the agents' records (`query.base` and `query.check` are not
/// used).
pub async fn checks_at(query: &Query) -> Result<Vec<RevertCheck>, String> {
    let target = crate::source::read::load_git_at(&query.repo, &query.rev, query.subdir.as_deref())
        .map_err(|d| d.to_string())?;
    if let Some(name) = &query.wave
        && !target.waves().iter().any(|w| &w.name == name)
    {
        return Err(format!("no wave named {name} in the fleet"));
    }
    let clusters = target.resolve_all().map_err(|e| e.to_string())?;
    let views = wave_views(&target, &clusters);
    let (mut pins, commits) =
        pin_history(&query.repo, &query.rev, query.subdir.as_deref(), &target)?;
    pins.retain(|p| query.wave.as_deref().is_none_or(|w| w == p.wave));
    let records = records_near(query, &target, &commits).await?;
    let available = |channel: &str, version: &str| {
        target
            .spec
            .images
            .get(channel)
            .is_some_and(|c| c.versions.contains_key(version))
    };
    Ok(reverts(&views, &pins, &records, available))
}

/// Every pin of `head` (the fleet at `rev`) with when it moved to its version and what it was
/// before; and the commits read, newest first, up to the oldest one the pins moved at.
fn pin_history(
    repo_path: &Path,
    rev: &str,
    subdir: Option<&Path>,
    head: &Fleet,
) -> Result<(Vec<PinHistory>, Vec<String>), String> {
    let repo = Repository::open(repo_path).map_err(|e| {
        format!(
            "{}: not a git repository: {}",
            repo_path.display(),
            e.message()
        )
    })?;
    let tip = repo
        .revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| format!("unknown revision {rev:?}: {}", e.message()))?;
    let tip_time = commit_time(&tip);
    // (pin, settled): settled once the version before the run is known.
    let mut pins: Vec<(PinHistory, bool)> = head
        .waves()
        .iter()
        .flat_map(|w| {
            w.images.iter().map(|(channel, version)| {
                (
                    PinHistory {
                        wave: w.name.clone(),
                        channel: channel.clone(),
                        version: version.clone(),
                        since: tip_time,
                        previous: None,
                    },
                    false,
                )
            })
        })
        .collect();
    let mut walk = repo
        .revwalk()
        .map_err(|e| format!("reading the history of {rev}: {}", e.message()))?;
    walk.push(tip.id())
        .and_then(|_| walk.simplify_first_parent())
        .map_err(|e| format!("reading the history of {rev}: {}", e.message()))?;
    let mut commits = Vec::new();
    let mut oldest_move = 0;
    // The fleet's folder's tree and the waves it held, to parse only commits that changed it.
    let mut last: Option<(Option<Oid>, Option<Vec<rota_core::fleet::model::Wave>>)> = None;
    for (n, oid) in walk.enumerate() {
        // A shallow history ends where its parents are missing: what was read is the history.
        let Some(commit) = oid.ok().and_then(|o| repo.find_commit(o).ok()) else {
            break;
        };
        if n >= HISTORY {
            break;
        }
        commits.push(commit.id().to_string());
        let tree = fleet_tree(&commit, subdir);
        let waves = match &last {
            Some((t, waves)) if *t == tree => waves.clone(),
            _ => crate::source::read::load_git_at(repo_path, &commit.id().to_string(), subdir)
                .ok()
                .map(|f| f.waves().to_vec()),
        };
        last = Some((tree, waves.clone()));
        // Invalid here: never in force, neither the pin nor another.
        let Some(waves) = waves else { continue };
        for (pin, settled) in pins.iter_mut().filter(|(_, s)| !s) {
            let then = waves
                .iter()
                .find(|w| w.name == pin.wave)
                .and_then(|w| w.images.get(&pin.channel));
            match then {
                Some(v) if *v == pin.version => {
                    pin.since = commit_time(&commit);
                    oldest_move = n;
                }
                other => {
                    pin.previous = other.cloned();
                    *settled = true;
                }
            }
        }
        if pins.iter().all(|(_, s)| *s) {
            break;
        }
    }
    commits.truncate(oldest_move + 1);
    Ok((pins.into_iter().map(|(p, _)| p).collect(), commits))
}

/// The tree of the fleet's folder in `commit` (`None`: the folder is missing).
fn fleet_tree(commit: &git2::Commit<'_>, subdir: Option<&Path>) -> Option<Oid> {
    let tree = commit.tree().ok()?;
    match subdir {
        Some(d) if !d.as_os_str().is_empty() && d != Path::new(".") => {
            tree.get_path(d).ok().map(|e| e.id())
        }
        _ => Some(tree.id()),
    }
}

/// When `commit` landed on its branch: its committer's time (a merge's is the merge's).
fn commit_time(commit: &git2::Commit<'_>) -> DateTime<Utc> {
    DateTime::from_timestamp(commit.committer().when().seconds(), 0).unwrap_or_default()
}

/// Each of the fleet's clusters' records from its newest note on `commits` (newest first).
async fn records_near(
    query: &Query,
    fleet: &Fleet,
    commits: &[String],
) -> Result<Vec<PoolRecord>, String> {
    let store = GitNotesStore::new(&query.repo, None, None).with_evidence(
        &crate::report::evidence::EvidenceKeys {
            signing_key: None,
            agent_signers: query.agent_signers.clone(),
        },
    );
    store.scope_to(fleet.cluster_names().map(str::to_string));
    let mut missing: BTreeSet<&str> = fleet.cluster_names().collect();
    let mut records = Vec::new();
    for commit in commits.iter().take(NOTES_DEPTH) {
        if missing.is_empty() {
            break;
        }
        for c in store.records(commit).await.map_err(|e| e.to_string())? {
            if missing.remove(c.cluster.as_str()) {
                records.extend(c.pools);
            }
        }
    }
    Ok(records)
}

/// Writes the commit that pins `reverts` (all of `wave`) back, on `target`: returns the
/// commit, its branch and its title.
pub fn write(
    at: &At<'_>,
    wave: &str,
    reverts: &[&Revert],
    target: &Target,
) -> Result<(Oid, String, String), String> {
    let changes: Vec<PinChange> = reverts
        .iter()
        .map(|r| PinChange {
            channel: r.channel.clone(),
            from: r.from.clone(),
            to: r.to.clone(),
        })
        .collect();
    let title = match reverts {
        [one] => one.title(),
        all => format!(
            "Revert wave {wave} to {} (failures on {})",
            all.iter()
                .map(|r| format!("{}@{}", r.channel, r.to))
                .collect::<Vec<_>>()
                .join(", "),
            all.iter()
                .map(|r| format!("{}@{}", r.channel, r.from))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let (id, branch) = commit_pins(at, wave, &changes, "revert", target, |commit| {
        let mut message = format!("{title}\n");
        for r in reverts {
            message += &format!("\n{}", r.body());
        }
        message += &format!(
            "\nThe records were read from the git notes of {} and the commits before it.\n\
             Written by rota.\n",
            &commit[..12]
        );
        message
    })?;
    Ok((id, branch, title))
}

/// `revert` on its branch `rota/revert/<wave>/<channel>-<version>` (rewritten from `at.rev`),
/// pushed, and its pull request opened or updated; the body is the summary, the evidence and,
/// while it fits, `rota diff --format markdown` of the change (see `promotion::body`). Unless a person already closed a pull request of that
/// branch since the pin moved: then nothing is pushed or opened, and the line says so.
pub async fn propose(at: &At<'_>, revert: &Revert, to: &Where<'_>) -> Result<String, String> {
    let branch = revert.branch();
    // Versions allow what a ref does not (`1..2`, `x.lock`): say so rather than fail in git.
    if !git2::Reference::is_valid_name(&format!("refs/heads/{branch}")) {
        return Err(format!(
            "{branch} is not a valid branch name (channel {:?}, version {:?}): revert by hand",
            revert.channel, revert.from
        ));
    }
    if let Some(forge) = to.forge {
        let closed = crate::report::pulls::closed_since(forge, &branch, revert.since)
            .await
            .map_err(|e| format!("looking for a closed pull request of {branch}: {e}"))?;
        if let Some(pr) = closed {
            return Ok(format!(
                "not proposed again: pull request #{} {} of {branch} was closed at {} (one \
                 proposal per wave and version)",
                pr.number,
                pr.url,
                pr.closed_at.format("%Y-%m-%dT%H:%M:%SZ")
            ));
        }
    }
    let target = Target::ProposalBranch(branch);
    let (id, branch, title) = write(at, &revert.wave, &[revert], &target)?;
    let before =
        crate::source::read::load_git_at(at.repo, at.rev, at.subdir).map_err(|d| d.to_string())?;
    let after = crate::source::read::load_git_at(at.repo, &id.to_string(), at.subdir)
        .map_err(|d| d.to_string())?;
    super::body::propose_change(to, &branch, &title, &revert.body(), &before, &after).await
}
