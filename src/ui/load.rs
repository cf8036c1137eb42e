//! The I/O edge of the fleet page: reads the fleet at a revision of a git repository and the
//! agents' git notes on it and on the commits before it, then hands them to the pure
//! [`super::model`]. The same reads `rota status` does; no cluster access.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use chrono::{DateTime, TimeZone, Utc};
use git2::{Oid, Repository};
use serde::Serialize;

use super::UiError;
use super::model::{FleetPage, Inputs, fleet_page};
use crate::report::note_doc::NoteDoc;
use crate::report::{GitNotesStore, NotesTips};
use rota_core::fleet::resolved::DesiredCluster;
use rota_core::waves::PoolRecord;

/// How far back the page looks for each pool's newest records: the agents write records on
/// the commits they act on, so right after a push the newest commit has none yet.
pub const RECORD_DEPTH: usize = 64;
/// Commits listed in the page's commit list.
pub const RECENT_COMMITS: usize = 15;

/// Where the page reads from.
#[derive(Debug, Clone)]
pub struct RepoAt {
    /// A local clone, or the bare mirror `rota ui` keeps of a URL.
    pub repo: PathBuf,
    /// The revision shown (a branch, `HEAD`, a commit).
    pub rev: String,
    /// The fleet repo is in this folder of the git tree.
    pub subdir: Option<PathBuf>,
    /// The agents' allowed-signers file (`--agent-signers`): records count only when signed
    /// by the agent of the cluster they speak for, as the agents and `rota promote` judge.
    pub agent_signers: Option<PathBuf>,
}

impl RepoAt {
    /// A read-only notes store over this repo for `clusters` (the fleet's declared ones):
    /// the one bounded, validated reader of notes (`report::note_reader`), with the same
    /// signature policy as the agents.
    pub fn notes(&self, clusters: impl IntoIterator<Item = String>) -> GitNotesStore {
        let store = GitNotesStore::new(&self.repo, None, None).with_evidence(
            &crate::report::evidence::EvidenceKeys {
                signing_key: None,
                agent_signers: self.agent_signers.clone(),
            },
        );
        store.scope_to(clusters);
        store
    }
}

/// One commit as a forge lists it: its id, subject, author, time and statuses.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitView {
    pub id: String,
    pub subject: String,
    pub author: String,
    pub time: DateTime<Utc>,
    /// Every status any agent recorded on it, by context.
    pub statuses: Vec<StatusRow>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusRow {
    pub context: String,
    pub state: String,
    pub description: String,
    pub updated_at: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_url: Option<String>,
}

impl CommitView {
    /// The combined state a forge shows beside the commit: failure over pending over success.
    pub fn combined(&self) -> &'static str {
        let has = |s: &str| self.statuses.iter().any(|r| r.state == s);
        combined(
            self.statuses.len(),
            has("failure") || has("error"),
            has("pending"),
        )
    }
}

/// The combined state of `statuses` statuses, some failed (or errored) or pending.
fn combined(statuses: usize, failure: bool, pending: bool) -> &'static str {
    if statuses == 0 {
        "none"
    } else if failure {
        "failure"
    } else if pending {
        "pending"
    } else {
        "success"
    }
}

/// One of the newest commits as the page's list shows it: its combined state and how many
/// statuses it has, not the statuses themselves (a commit's own page reads them when asked,
/// [`commit`]). At 10,000 clusters the statuses of the listed commits were 22 MB a list,
/// and a rebuild held two lists.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitLine {
    pub id: String,
    pub subject: String,
    pub author: String,
    pub time: DateTime<Utc>,
    /// [`CommitView::combined`].
    pub combined: &'static str,
    /// How many statuses agents recorded on it.
    pub statuses: usize,
}

fn git(repo: &Path) -> impl Fn(git2::Error) -> UiError + '_ {
    move |e| UiError::Git {
        repo: repo.to_path_buf(),
        message: e.message().to_string(),
    }
}

/// For the processes that only show what git holds (`status`, `where`, `ui`): libgit2 hashes
/// every object it reads to check it against its name, which git's own readers (`git log`,
/// `git show`) do not do (`git fsck` checks a repository). At 10,000 clusters a view reads
/// 30,000 objects (each cluster's notes commit, tree and note), and hashing them was a
/// twentieth of `rota status --fleet`. What is read stays bounded and validated (the note
/// reader, the fleet's schema). Not for the agent or `rota promote`, which act on what they
/// read. Call before any repository is opened.
pub fn trust_the_object_store() {
    git2::opts::strict_hash_verification(false);
}

/// Resolves `rev` in `repo` to a commit id.
pub fn resolve(repo: &Path, rev: &str) -> Result<Oid, UiError> {
    let r = Repository::open(repo).map_err(git(repo))?;
    resolve_in(&r, repo, rev)
}

/// [`resolve`] in a repository already open (`path` names it in errors).
pub fn resolve_in(r: &Repository, path: &Path, rev: &str) -> Result<Oid, UiError> {
    let obj = r.revparse_single(rev).map_err(|e| UiError::Git {
        repo: path.to_path_buf(),
        message: format!("revision {rev:?}: {}", e.message()),
    })?;
    let commit = obj.peel_to_commit().map_err(git(path))?;
    Ok(commit.id())
}

/// The committer time of `commit`.
fn commit_time(repo: &Path, commit: Oid) -> Result<DateTime<Utc>, UiError> {
    let r = Repository::open(repo).map_err(git(repo))?;
    let c = r.find_commit(commit).map_err(git(repo))?;
    Ok(Utc
        .timestamp_opt(c.time().seconds(), 0)
        .single()
        .unwrap_or_default())
}

/// The first-parent history from `from`, newest first, at most `n` commits.
fn history(repo: &Path, from: Oid, n: usize) -> Result<Vec<Oid>, UiError> {
    let r = Repository::open(repo).map_err(git(repo))?;
    let mut walk = r.revwalk().map_err(git(repo))?;
    walk.push(from).map_err(git(repo))?;
    walk.simplify_first_parent().map_err(git(repo))?;
    walk.take(n)
        .map(|o| o.map_err(git(repo)))
        .collect::<Result<Vec<_>, _>>()
}

async fn docs(store: &GitNotesStore, commit: Oid) -> Result<Vec<NoteDoc>, UiError> {
    store
        .docs(&commit.to_string())
        .await
        .map_err(|e| UiError::Notes(e.to_string()))
}

/// Everything the page is computed from, read from git once: the fleet at the revision,
/// the notes on it and the newest records before it, and the recent commits. The page itself
/// ([`Loaded::page`]) is a pure function of this and the clock, so a server can keep it while
/// neither the revision nor any notes ref moved ([`Loaded::key`]).
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The fleet at the commit, without its cluster documents (see `resolve_for_views`).
    pub fleet: rota_core::fleet::Fleet,
    pub clusters: Vec<rota_core::fleet::resolved::DesiredCluster>,
    /// The agents' notes on the commit: their statuses (their records are in `records`).
    pub head_docs: Vec<NoteDoc>,
    /// Each pool's newest records, from the commit or the nearest before it that has them
    /// (in no particular order: the page indexes them).
    pub records: Vec<PoolRecord>,
    /// Each head note's size in bytes, by cluster: with only some notes read again
    /// ([`reload_moved_notes`]), the commit's notes still keep to their byte budget.
    pub note_bytes: BTreeMap<String, u64>,
    pub verified: bool,
    /// When the commit shown was made (its committer time): how long the agents have had
    /// to report on it.
    pub commit_time: DateTime<Utc>,
    /// What this was read at: the commit and every read notes ref's tip.
    pub key: Key,
}

/// The commit shown and the tips of the notes refs read: equal keys, equal page inputs.
pub type Key = (Oid, Vec<(String, Oid)>);

impl Loaded {
    /// The page as of `now`.
    pub fn page(&self, now: DateTime<Utc>) -> FleetPage {
        fleet_page(&Inputs {
            fleet: &self.fleet,
            clusters: &self.clusters,
            docs: &self.head_docs,
            records: &self.records,
            now,
            verified: self.verified,
        })
    }

    pub fn cluster_names(&self) -> Vec<String> {
        self.clusters.iter().map(|c| c.name.clone()).collect()
    }
}

/// The key `at` would load with now, given the key and the clusters of the last load
/// (`None`: the revision moved, so the clusters may have too).
pub async fn key_now(at: &RepoAt, last: &Key, names: &[String]) -> Result<Option<Key>, UiError> {
    let commit = resolve(&at.repo, &at.rev)?;
    if commit != last.0 {
        return Ok(None);
    }
    let tips = at
        .notes(Vec::new())
        .fingerprint(names.to_vec())
        .await
        .map_err(|e| UiError::Notes(e.to_string()))?;
    Ok(Some((commit, tips)))
}

/// Reads what the page of `at` is computed from.
pub async fn load(at: &RepoAt) -> Result<Loaded, UiError> {
    let started = std::time::Instant::now();
    let commit = resolve(&at.repo, &at.rev)?;
    let fleet =
        crate::source::read::load_git_at(&at.repo, &commit.to_string(), at.subdir.as_deref())
            .map_err(|d| UiError::Fleet(d.to_string()))?;
    let read = started.elapsed();
    let mut fleet = fleet;
    let clusters = resolve_for_views(&mut fleet).map_err(|e| UiError::Fleet(e.to_string()))?;
    tracing::debug!(
        clusters = clusters.len(),
        read_ms = read.as_millis() as u64,
        resolve_ms = (started.elapsed() - read).as_millis() as u64,
        "fleet read for the views"
    );
    load_notes(at, commit, fleet, clusters).await
}

/// The notes part of [`load`], for a fleet already read at `commit`: when only notes moved
/// (agents reporting, the common change), the server reads them again and keeps the fleet,
/// instead of reading and validating 10,000 cluster files for nothing.
pub async fn load_notes(
    at: &RepoAt,
    commit: Oid,
    fleet: rota_core::fleet::Fleet,
    clusters: Vec<rota_core::fleet::resolved::DesiredCluster>,
) -> Result<Loaded, UiError> {
    let names: Vec<String> = clusters.iter().map(|c| c.name.clone()).collect();
    // Only the declared clusters' notes, each from its own ref: a note under a ref that no
    // cluster owns, or about another cluster, holds nothing here as it does for the guard.
    let store = at.notes(names.clone());
    let started = std::time::Instant::now();
    // The notes are read at the tips the key records (each ref looked up once): a ref that
    // moves during the read is seen by the next key.
    let tips = store.tips(names).await.map_err(notes_err)?;
    let sized = store
        .sized_docs_at(&commit.to_string(), tips.clone())
        .await
        .map_err(notes_err)?;
    let head_read = started.elapsed();
    let all: Vec<&DesiredCluster> = clusters.iter().collect();
    let (head_docs, records, note_bytes) =
        statuses_and_records(at, &store, commit, &tips, &all, sized).await?;
    tracing::debug!(
        notes_refs = tips.fingerprint().len(),
        head_ms = head_read.as_millis() as u64,
        history_ms = (started.elapsed() - head_read).as_millis() as u64,
        "notes read for the views"
    );
    Ok(Loaded {
        fleet,
        clusters,
        head_docs,
        records,
        note_bytes,
        verified: at.agent_signers.is_some(),
        commit_time: commit_time(&at.repo, commit)?,
        key: (commit, tips.fingerprint()),
    })
}

/// `last` (read at its commit) with the notes of the clusters whose notes refs moved since
/// (written, added, deleted) read again, and only theirs: agents report a cluster at a
/// time, and reading 10,000 notes again because one moved was most of a rebuild's time
/// and of the server's peak memory. The result equals [`load_notes`] at the same tips.
/// When half the clusters or more moved, or the commit's notes would pass their byte budget
/// (which a whole read cuts in cluster order), every note is read again.
pub async fn reload_moved_notes(at: &RepoAt, mut last: Loaded) -> Result<Loaded, UiError> {
    let commit = last.key.0;
    let names = last.cluster_names();
    let store = at.notes(names.clone());
    let tips = store.tips(names).await.map_err(notes_err)?;
    let now = tips.fingerprint();
    let before: BTreeMap<&str, Oid> = last.key.1.iter().map(|(c, o)| (c.as_str(), *o)).collect();
    let after: BTreeMap<&str, Oid> = now.iter().map(|(c, o)| (c.as_str(), *o)).collect();
    let moved: BTreeSet<String> = before
        .keys()
        .chain(after.keys())
        .filter(|c| before.get(*c) != after.get(*c))
        .map(|c| c.to_string())
        .collect();
    if moved.len() * 2 >= last.clusters.len().max(1) {
        return load_notes(at, commit, last.fleet, last.clusters).await;
    }
    let sized = store
        .sized_docs_at(&commit.to_string(), tips.only(|c| moved.contains(c)))
        .await
        .map_err(notes_err)?;
    let kept: u64 = last
        .note_bytes
        .iter()
        .filter(|(c, _)| !moved.contains(*c))
        .map(|(_, b)| b)
        .sum();
    let read: u64 = sized.iter().map(|(_, b)| b).sum();
    if kept + read > crate::report::note_reader::MAX_NOTES_BYTES_PER_COMMIT {
        return load_notes(at, commit, last.fleet, last.clusters).await;
    }
    let changed: Vec<&DesiredCluster> = last
        .clusters
        .iter()
        .filter(|c| moved.contains(&c.name))
        .collect();
    let (docs, records, bytes) =
        statuses_and_records(at, &store, commit, &tips, &changed, sized).await?;
    tracing::debug!(
        moved = moved.len(),
        "notes read again for the clusters whose refs moved"
    );
    last.head_docs.retain(|d| !moved.contains(&d.cluster));
    last.head_docs.extend(docs);
    last.head_docs.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    last.records.retain(|r| !moved.contains(&r.cluster));
    last.records.extend(records);
    last.note_bytes.retain(|c, _| !moved.contains(c));
    last.note_bytes.extend(bytes);
    last.key = (commit, now);
    Ok(last)
}

fn notes_err(e: crate::report::ReportError) -> UiError {
    UiError::Notes(e.to_string())
}

/// What the page reads of `clusters`' notes, from their notes on the head (`sized`, as read
/// at `tips`): the notes' statuses, each declared pool's newest records, and each note's
/// size by cluster.
async fn statuses_and_records(
    at: &RepoAt,
    store: &GitNotesStore,
    commit: Oid,
    tips: &NotesTips,
    clusters: &[&DesiredCluster],
    sized: Vec<(NoteDoc, u64)>,
) -> Result<(Vec<NoteDoc>, Vec<PoolRecord>, BTreeMap<String, u64>), UiError> {
    let note_bytes = sized.iter().map(|(d, b)| (d.cluster.clone(), *b)).collect();
    let mut head_docs: Vec<NoteDoc> = sized.into_iter().map(|(d, _)| d).collect();
    // The head's records move to `records` below; the page reads the docs' statuses only.
    let mut head_records: Vec<PoolRecord> = head_docs
        .iter_mut()
        .flat_map(|d| std::mem::take(&mut d.pools))
        .collect();
    // Kept as long as the page: only the room the statuses use (parsing grew each list
    // one status at a time, 6 statuses into room for 8).
    for d in &mut head_docs {
        d.statuses.shrink_to_fit();
    }
    // Each pool's newest records: records are cumulative, so the newest commit that carries
    // a pool's record has everything the pool ever recorded (up to KEPT_PER_POOL). Older
    // commits are read only for the clusters still missing a declared pool's record: once
    // the agents have written records on the newest commit, the walk reads nothing more, so
    // the cost follows the fleet, not the fleet times the history.
    let mut records: Vec<PoolRecord> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut missing: Vec<&DesiredCluster> = clusters.to_vec();
    for c in history(&at.repo, commit, RECORD_DEPTH)? {
        if missing.is_empty() {
            break;
        }
        let found: Vec<PoolRecord> = if c == commit {
            std::mem::take(&mut head_records)
        } else {
            let names: BTreeSet<&str> = missing.iter().map(|c| c.name.as_str()).collect();
            store
                .docs_at(&c.to_string(), tips.only(|c| names.contains(c)))
                .await
                .map_err(notes_err)?
                .into_iter()
                .flat_map(|d| d.pools)
                .collect()
        };
        for r in found {
            if seen.insert((r.cluster.clone(), r.pool.clone())) {
                records.push(r);
            }
        }
        missing.retain(|c| {
            c.pools
                .iter()
                .any(|p| !seen.contains(&(c.name.clone(), p.name.clone())))
        });
    }
    Ok((head_docs, records, note_bytes))
}

/// Every cluster of `fleet` resolved (as `Fleet::resolve_all`, in the same order, failing on
/// the same cluster) without what the views never read, each cluster's document let go of as
/// soon as the cluster is resolved: the views read the fleet's waves and images and the
/// resolved clusters, and not a resolved pool's rollout policy, gates or node selector (the
/// agent's business). At 10,000 clusters these were most of what `rota ui` kept between
/// requests. Resolving every cluster before dropping any of that held the documents (63 MB)
/// and the clusters resolved whole (73 MB) at once: the page server's peak, at its start
/// (heaptrack, docs/benchmarks.md).
fn resolve_for_views(
    fleet: &mut rota_core::fleet::Fleet,
) -> Result<Vec<DesiredCluster>, rota_core::fleet::resolve::ResolveError> {
    let names: Vec<String> = fleet.clusters.keys().cloned().collect();
    let mut clusters = Vec::with_capacity(names.len());
    for name in &names {
        let mut cluster = fleet.resolve_cluster(name)?;
        for p in &mut cluster.pools {
            p.policy = Default::default();
            p.gates = Vec::new();
            p.node_selector = Default::default();
        }
        fleet.clusters.remove(name);
        clusters.push(cluster);
    }
    Ok(clusters)
}

/// The page for `at` as of `now`.
pub async fn page(at: &RepoAt, now: DateTime<Utc>) -> Result<FleetPage, UiError> {
    Ok(load(at).await?.page(now))
}

/// The newest commits of `loaded`'s revision, each with the combined state and count of its
/// clusters' statuses.
pub async fn recent_of(at: &RepoAt, loaded: &Loaded) -> Result<Vec<CommitLine>, UiError> {
    let names = loaded.cluster_names();
    let store = at.notes(names.clone());
    let tips = store.tips(names).await.map_err(notes_err)?;
    let mut out = Vec::new();
    for c in history(&at.repo, loaded.key.0, RECENT_COMMITS)? {
        out.push(commit_line(&at.repo, &store, &tips, c).await?);
    }
    Ok(out)
}

/// Clusters whose notes [`commit_line`] reads at once: the count and combined state are
/// folded a part at a time, so that listing 15 commits of 10,000 clusters never holds more
/// than this many notes (a whole commit's statuses were 22 MB, the peak of a rebuild).
const LINE_PART: usize = 1_000;

/// One commit of the list: its subject, author and time, and the count and combined state
/// of its statuses, read from the notes at `tips`.
async fn commit_line(
    repo: &Path,
    store: &GitNotesStore,
    tips: &NotesTips,
    id: Oid,
) -> Result<CommitLine, UiError> {
    let (subject, author, time) = header(repo, id)?;
    let (mut statuses, mut failure, mut pending) = (0usize, false, false);
    for part in tips.parts(LINE_PART) {
        for d in store
            .docs_at(&id.to_string(), part)
            .await
            .map_err(notes_err)?
        {
            for s in &d.statuses {
                statuses += 1;
                match s.state.as_str() {
                    "failure" | "error" => failure = true,
                    "pending" => pending = true,
                    _ => {}
                }
            }
        }
    }
    Ok(CommitLine {
        id: id.to_string(),
        subject,
        author,
        time,
        combined: combined(statuses, failure, pending),
        statuses,
    })
}

/// A commit's subject, author and time, made safe for a terminal and a page.
fn header(repo: &Path, id: Oid) -> Result<(String, String, DateTime<Utc>), UiError> {
    let r = Repository::open(repo).map_err(git(repo))?;
    let c = r.find_commit(id).map_err(git(repo))?;
    let time = Utc
        .timestamp_opt(c.time().seconds(), 0)
        .single()
        .unwrap_or_default();
    // Anyone with push access writes these.
    Ok((
        rota_core::sanitize::line(&String::from_utf8_lossy(
            c.summary_bytes().unwrap_or_default(),
        ))
        .into_owned(),
        rota_core::sanitize::line(&String::from_utf8_lossy(c.author().name_bytes())).into_owned(),
        time,
    ))
}

/// The statuses of the commit `rev` names, as a forge shows them: those of the clusters
/// `store` reads (the fleet's, at the revision shown).
pub async fn commit(repo: &Path, store: &GitNotesStore, rev: &str) -> Result<CommitView, UiError> {
    let id = resolve(repo, rev)?;
    let (subject, author, time) = header(repo, id)?;
    let mut statuses: Vec<StatusRow> = docs(store, id)
        .await?
        .into_iter()
        .flat_map(|d| d.statuses)
        .map(|s| StatusRow {
            context: s.context,
            state: s.state.as_str().to_string(),
            description: s.description,
            updated_at: s.updated_at,
            target_url: s.target_url,
        })
        .collect();
    statuses.sort_by(|a, b| a.context.cmp(&b.context));
    Ok(CommitView {
        id: id.to_string(),
        subject,
        author,
        time,
        statuses,
    })
}

#[cfg(test)]
mod tests {
    /// The views' resolution is `resolve_all`'s, less what they never read, and it leaves
    /// no cluster document behind.
    #[test]
    fn clusters_resolve_as_resolve_all_less_what_the_views_never_read() {
        let mut fleet = crate::source::read::load_dir(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo"),
        )
        .unwrap();
        let mut whole = fleet.resolve_all().unwrap();
        assert!(
            whole
                .iter()
                .flat_map(|c| &c.pools)
                .any(|p| !p.node_selector.is_empty()),
            "the example has something to leave out"
        );
        for p in whole.iter_mut().flat_map(|c| c.pools.iter_mut()) {
            p.policy = Default::default();
            p.gates = Vec::new();
            p.node_selector = Default::default();
        }
        let slim = super::resolve_for_views(&mut fleet).unwrap();
        assert_eq!(slim, whole);
        assert!(fleet.clusters.is_empty(), "the documents are let go of");
    }
}
