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
//! What the agents had recorded before a pin moved is each cluster's newest note on the
//! commits older than the move (at most [`NOTES_DEPTH`] of them): a failure found there is
//! from before the move. Commit dates order nothing: the pusher writes them.

use std::collections::BTreeSet;
use std::path::Path;

use chrono::{DateTime, Utc};
use git2::{Oid, Repository};

use super::Query;
use super::commit::{At, commit_pins};
use super::pin::Target;
use super::propose::Where;
use crate::report::GitNotesStore;
use rota_core::edit::PinChange;
use rota_core::fleet::Fleet;
use rota_core::fleet::model::Wave;
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
    pins.retain(|(p, _)| query.wave.as_deref().is_none_or(|w| w == p.wave));
    let store = notes_store(query, &target);
    let oldest_move = pins.iter().map(|(_, m)| *m).max().unwrap_or(0);
    let newest_first = &commits[..commits.len().min(oldest_move + 1)];
    let records = newest_records(&store, &target, newest_first).await?;
    // Each pin: the records from before its move, read once per commit a pin moved at.
    let mut before: std::collections::HashMap<usize, Vec<PoolRecord>> = Default::default();
    for (pin, moved) in &mut pins {
        if !before.contains_key(moved) {
            let older = commits.get(*moved + 1..).unwrap_or_default();
            before.insert(*moved, newest_records(&store, &target, older).await?);
        }
        pin.recorded_before = before[moved].clone();
    }
    let pins: Vec<PinHistory> = pins.into_iter().map(|(p, _)| p).collect();
    let available = |channel: &str, version: &str| {
        target
            .spec
            .images
            .get(channel)
            .is_some_and(|c| c.versions.contains_key(version))
    };
    Ok(reverts(&views, &pins, &records, available))
}

/// Every pin of `head` (the fleet at `rev`) with when it moved to its version, what it was
/// before, and the index in the commits of the commit that moved it; and the commits read,
/// newest first: up to the oldest one the pins moved at, then up to [`NOTES_DEPTH`] older
/// ones (where the records from before the moves are read).
type Pins = Vec<(PinHistory, usize)>;

fn pin_history(
    repo_path: &Path,
    rev: &str,
    subdir: Option<&Path>,
    head: &Fleet,
) -> Result<(Pins, Vec<String>), String> {
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
    // (pin, where it moved, settled): settled once the version before the run is known.
    let mut pins: Vec<(PinHistory, usize, bool)> = head
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
                        recorded_before: Vec::new(),
                    },
                    0,
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
    let mut settled_at = None;
    let mut waves_of = WavesCache::new(&repo, &tip, subdir);
    for (n, oid) in walk.enumerate() {
        // A shallow history ends where its parents are missing: what was read is the history.
        let Some(commit) = oid.ok().and_then(|o| repo.find_commit(o).ok()) else {
            break;
        };
        if n >= HISTORY || settled_at.is_some_and(|s| n > s + NOTES_DEPTH) {
            break;
        }
        commits.push(commit.id().to_string());
        if settled_at.is_some() {
            // Past every move: only the commits, for the notes written before them.
            continue;
        }
        // Invalid here: never in force, neither the pin nor another.
        let Some(waves) = waves_of.at(repo_path, &commit, subdir) else {
            continue;
        };
        for (pin, moved, settled) in pins.iter_mut().filter(|(_, _, s)| !s) {
            let then = waves
                .iter()
                .find(|w| w.name == pin.wave)
                .and_then(|w| w.images.get(&pin.channel));
            match then {
                Some(v) if *v == pin.version => {
                    pin.since = commit_time(&commit);
                    *moved = n;
                }
                other => {
                    pin.previous = other.cloned();
                    *settled = true;
                }
            }
        }
        if pins.iter().all(|(_, _, s)| *s) {
            settled_at = Some(n);
        }
    }
    Ok((pins.into_iter().map(|(p, m, _)| (p, m)).collect(), commits))
}

/// The waves at each commit of the walk, read without loading the whole fleet where they
/// cannot have changed: a commit whose fleet folder is the tree of the commit read before it,
/// or whose file holding the Fleet document is the same blob, has that commit's waves. Only
/// a commit that changed the Fleet document is loaded whole (and skipped when it does not
/// load). A history of 2,000 commits that each touched a cluster file otherwise loaded the
/// whole fleet 2,000 times: 87 s for the 6-cluster example fleet (debug build), and in
/// proportion to the fleet's size beyond.
struct WavesCache {
    /// The file of the fleet's folder that holds the Fleet document at the tip.
    fleet_file: Option<std::path::PathBuf>,
    /// Commits whose fleet was loaded whole.
    loads: usize,
    /// The commit read last.
    last: Option<Read>,
}

/// One commit of the walk as [`WavesCache`] read it.
struct Read {
    /// Its fleet folder's tree.
    tree: Option<Oid>,
    /// The blob of its file holding the Fleet document.
    blob: Option<Oid>,
    /// Its waves (`None`: its fleet did not load).
    waves: Option<Vec<Wave>>,
}

impl WavesCache {
    fn new(repo: &Repository, tip: &git2::Commit<'_>, subdir: Option<&Path>) -> Self {
        WavesCache {
            fleet_file: fleet_file(repo, tip, subdir),
            loads: 0,
            last: None,
        }
    }

    /// The waves of `commit`; `None` when its fleet does not load.
    fn at(
        &mut self,
        repo_path: &Path,
        commit: &git2::Commit<'_>,
        subdir: Option<&Path>,
    ) -> Option<Vec<Wave>> {
        let tree = fleet_tree(commit, subdir);
        let blob = self.fleet_file.as_deref().and_then(|f| {
            let path = subdir.map_or_else(|| f.to_path_buf(), |d| d.join(f));
            commit.tree().ok()?.get_path(&path).ok().map(|e| e.id())
        });
        let waves = match &self.last {
            Some(last) if last.tree == tree => last.waves.clone(),
            Some(Read {
                blob: b,
                waves: Some(waves),
                ..
            }) if blob.is_some() && *b == blob => Some(waves.clone()),
            _ => {
                self.loads += 1;
                crate::source::read::load_git_at(repo_path, &commit.id().to_string(), subdir)
                    .ok()
                    .map(|f| f.waves().to_vec())
            }
        };
        self.last = Some(Read {
            tree,
            blob,
            waves: waves.clone(),
        });
        waves
    }
}

/// The YAML file of the fleet's folder in `commit` that holds the `kind: Fleet` document
/// (its path inside the folder); `None` when none is found (every commit is then loaded).
fn fleet_file(
    repo: &Repository,
    commit: &git2::Commit<'_>,
    subdir: Option<&Path>,
) -> Option<std::path::PathBuf> {
    let root = commit.tree().ok()?;
    let tree = match subdir {
        Some(d) if !d.as_os_str().is_empty() && d != Path::new(".") => {
            repo.find_tree(root.get_path(d).ok()?.id()).ok()?
        }
        _ => root,
    };
    let mut found = None;
    let _ = tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        let name = entry.name().unwrap_or("");
        let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
        // The reader skips hidden folders (`.github`): so does this.
        let hidden = dir.split('/').any(|c| c.starts_with('.'));
        if hidden || !yaml || entry.kind() != Some(git2::ObjectType::Blob) {
            return git2::TreeWalkResult::Ok;
        }
        let holds = repo
            .find_blob(entry.id())
            .ok()
            .filter(|b| b.size() <= crate::source::read::MAX_FILE_BYTES as usize)
            .is_some_and(|b| {
                String::from_utf8_lossy(b.content())
                    .lines()
                    .any(|l| l.trim_end() == "kind: Fleet")
            });
        if holds {
            found = Some(Path::new(dir).join(name));
            return git2::TreeWalkResult::Abort;
        }
        git2::TreeWalkResult::Ok
    });
    found
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

/// When `commit` landed on its branch, as its committer wrote it (a merge's is the merge's):
/// said in the proposal, never used to order records.
fn commit_time(commit: &git2::Commit<'_>) -> DateTime<Utc> {
    DateTime::from_timestamp(commit.committer().when().seconds(), 0).unwrap_or_default()
}

/// The notes of the fleet's clusters, with the query's rules for whose records count.
fn notes_store(query: &Query, fleet: &Fleet) -> GitNotesStore {
    let store = GitNotesStore::new(&query.repo, None, None).with_evidence(
        &crate::report::evidence::EvidenceKeys {
            signing_key: None,
            agent_signers: query.agent_signers.clone(),
        },
    );
    store.scope_to(fleet.cluster_names().map(str::to_string));
    store
}

/// Each of the fleet's clusters' records from its newest note on `commits` (newest first),
/// at most [`NOTES_DEPTH`] of them.
async fn newest_records(
    store: &GitNotesStore,
    fleet: &Fleet,
    commits: &[String],
) -> Result<Vec<PoolRecord>, String> {
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
/// while it fits, `rota diff --format markdown` of the change (see `promotion::body`). Unless a
/// person already closed a pull request of that branch since the pin moved (as the agents'
/// records date it: [`Revert::closed_counts_since`]): then nothing is pushed or opened, and the
/// line says so.
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
        let closed =
            crate::forge::pulls::closed_since(forge, &branch, revert.closed_counts_since())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(["-c", "commit.gpgsign=false"])
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }

    /// 30 commits that each touch a cluster file, one that changes the Fleet document, one
    /// whose Fleet document does not load: the walk loads the fleet whole only where the Fleet
    /// document may have changed, not at each of the 33 commits.
    #[test]
    fn the_fleet_is_loaded_whole_only_where_the_fleet_document_changed() {
        let t = tempfile::tempdir().unwrap();
        let work = t.path();
        copy(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo"),
            work,
        );
        git(work, &["init", "-q", "-b", "main"]);
        git(work, &["add", "-A"]);
        git(work, &["commit", "-q", "-m", "fleet"]);
        let fleet = std::fs::read_to_string(work.join("fleet.yaml")).unwrap();
        std::fs::write(work.join("fleet.yaml"), format!("{fleet}\n  bogus: 1\n")).unwrap();
        git(work, &["commit", "-q", "-am", "broken"]);
        std::fs::write(work.join("fleet.yaml"), format!("# moved\n{fleet}")).unwrap();
        git(work, &["commit", "-q", "-am", "the Fleet document changes"]);
        let cluster = std::fs::read_dir(work.join("clusters/aws"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let text = std::fs::read_to_string(&cluster).unwrap();
        for n in 0..30 {
            std::fs::write(&cluster, format!("{text}\n# {n}\n")).unwrap();
            git(work, &["commit", "-q", "-am", &format!("touch {n}")]);
        }
        let repo = Repository::open(work).unwrap();
        let tip = repo.head().unwrap().peel_to_commit().unwrap();
        let mut cache = WavesCache::new(&repo, &tip, None);
        assert_eq!(cache.fleet_file.as_deref(), Some(Path::new("fleet.yaml")));
        let mut walk = repo.revwalk().unwrap();
        walk.push(tip.id()).unwrap();
        walk.simplify_first_parent().unwrap();
        let read: Vec<bool> = walk
            .map(|o| {
                let c = repo.find_commit(o.unwrap()).unwrap();
                cache.at(work, &c, None).is_some()
            })
            .collect();
        assert_eq!(read.len(), 33);
        // Every commit has waves but the broken one (second oldest).
        assert_eq!(read.iter().filter(|r| !**r).count(), 1);
        assert!(!read[31], "{read:?}");
        // The tip; the broken commit (its Fleet file differs from the commit after it); the
        // first one (the commit read before it did not load). Not the 30 touches.
        assert_eq!(cache.loads, 3);
    }
}
