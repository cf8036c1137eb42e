//! The default status store: git notes in the fleet repo itself. Each agent writes only its
//! own cluster's notes ref, `refs/notes/rota/<cluster>`, so refs never conflict: one writer
//! per ref, fast-forward pushes. The note on a fleet commit is a JSON document with that
//! cluster's statuses and its pools' completion and gate-failure records (which the promotion
//! guard of later waves reads):
//!
//! ```json
//! {
//!   "cluster": "canary-use1",
//!   "statuses": [
//!     {"context": "rota/canary-use1", "state": "pending", "description": "1/2 pools rotating",
//!      "updatedAt": "2026-11-22T03:00:00Z"}
//!   ],
//!   "pools": [
//!     {"cluster": "canary-use1", "pool": "general", "completions": [
//!       {"channel": "general", "version": "2026.11.2", "completedAt": "2026-11-22T02:40:00Z"}]}
//!   ]
//! }
//! ```
//!
//! Read it with `git fetch origin 'refs/notes/rota/*:refs/notes/rota/*'` then
//! `git notes --ref rota/canary-use1 show <commit>`. Other clusters' notes are read from
//! `refs/rota/remote-notes/<cluster>`, where [`crate::source::GitSource::fetch`] mirrors them.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use git2::{Oid, PushOptions, Repository};

use super::evidence::{self, EvidenceKeys, RecordVerifier};
use super::note_doc::{NoteDoc, NoteStatus, notes_ref};
use super::note_reader;
use super::status::CommitStatus;
use super::store::{Posted, ReportError, StatusStore, validate};
use crate::source::credentials::{self, Auth, KnownHosts};
use crate::source::{NOTES_PREFIX, REMOTE_NOTES_PREFIX};
use rota_core::waves::PoolRecord;

/// Where to push the notes ref (the fleet repo's remote), with the source's credentials.
#[derive(Debug, Clone)]
pub struct PushTarget {
    pub url: String,
    pub auth: Auth,
    pub known_hosts: Option<KnownHosts>,
}

/// Git-notes status store over a local repository (the source's bare mirror).
#[derive(Debug, Clone)]
pub struct GitNotesStore {
    inner: Arc<Inner>,
    write_lock: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Debug)]
struct Inner {
    repo: PathBuf,
    /// The cluster this store writes for (`None`: read-only, e.g. `rota status`).
    cluster: Option<String>,
    push: Option<PushTarget>,
    /// Signs this cluster's records (when a key is set).
    signing_key: Option<PathBuf>,
    /// Accepts only signed records (when agents' signers are set).
    verifier: Option<RecordVerifier>,
    /// The clusters the fleet declares, once known ([`GitNotesStore::scope_to`]): only their
    /// refs are read, each by name, so refs pushed by anyone else (a flood sorting first, a
    /// ref no cluster owns) are never read at all. Until then only our own cluster's.
    scope: std::sync::Mutex<Option<std::collections::BTreeSet<String>>>,
}

/// One cluster's records on one commit, as accepted by the store's policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterRecords {
    pub cluster: String,
    pub pools: Vec<PoolRecord>,
}

/// The notes refs of some clusters and their tips, as looked up at one moment
/// ([`GitNotesStore::tips`]), in cluster order: (cluster, (ref name, tip)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NotesTips(Vec<(String, (String, Oid))>);

impl NotesTips {
    /// Each cluster with its ref's tip: equal fingerprints, equal notes.
    pub fn fingerprint(&self) -> Vec<(String, Oid)> {
        self.0.iter().map(|(c, (_, id))| (c.clone(), *id)).collect()
    }

    /// Only the clusters `keep` accepts.
    pub fn only(&self, keep: impl Fn(&str) -> bool) -> NotesTips {
        NotesTips(self.0.iter().filter(|(c, _)| keep(c)).cloned().collect())
    }

    /// These tips in parts of at most `n` clusters, in order.
    pub fn parts(&self, n: usize) -> impl Iterator<Item = NotesTips> + '_ {
        self.0.chunks(n.max(1)).map(|p| NotesTips(p.to_vec()))
    }
}

/// One cluster's note as read: validated, its records as the policy accepts them.
struct Vetted {
    doc: NoteDoc,
    /// False when the policy refused the note's records (unsigned, forged, misplaced).
    records_accepted: bool,
}

fn remote_notes_ref(cluster: &str) -> String {
    format!("{REMOTE_NOTES_PREFIX}{cluster}")
}

/// Whether `repo` holds any fetched copy of a notes ref (an agent's mirror does; the git
/// server's own repo does not): a folder of loose ones, or one packed. `packed-refs` larger
/// than a bound is taken to hold some rather than read whole: the answer only saves lookups.
fn has_fetched_notes(repo: &Repository) -> bool {
    const READ_AT_MOST: u64 = 64 << 20;
    let git_dir = repo.path();
    if git_dir
        .join(REMOTE_NOTES_PREFIX.trim_end_matches('/'))
        .is_dir()
    {
        return true;
    }
    let packed = git_dir.join("packed-refs");
    match std::fs::metadata(&packed) {
        Err(_) => false,
        Ok(m) if m.len() > READ_AT_MOST => true,
        Ok(_) => std::fs::read(&packed).map_or(true, |text| {
            let needle = REMOTE_NOTES_PREFIX.as_bytes();
            text.windows(needle.len()).any(|w| w == needle)
        }),
    }
}

impl GitNotesStore {
    /// A store over the repository at `repo`, writing as `cluster` (if any) and pushing to
    /// `push` (if any) after every change.
    pub fn new(repo: &Path, cluster: Option<&str>, push: Option<PushTarget>) -> Self {
        GitNotesStore {
            inner: Arc::new(Inner {
                repo: repo.to_path_buf(),
                cluster: cluster.map(str::to_string),
                push,
                signing_key: None,
                verifier: None,
                scope: std::sync::Mutex::new(None),
            }),
            write_lock: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// The agent's store: writes as `cluster` into the source's mirror and pushes to the
    /// source's remote with the source's credentials.
    pub fn for_source(source: &crate::source::GitSource, cluster: &str) -> Self {
        let config = source.config();
        GitNotesStore::new(
            source.mirror_path(),
            Some(cluster),
            Some(PushTarget {
                url: config.url.clone(),
                auth: config.auth.clone(),
                known_hosts: source.known_hosts().cloned(),
            }),
        )
    }

    /// Sign this cluster's records with `keys.signing_key` and accept only records signed by
    /// their cluster's key in `keys.agent_signers` (each when set). Call before sharing.
    pub fn with_evidence(mut self, keys: &EvidenceKeys) -> Self {
        let inner = Arc::get_mut(&mut self.inner).expect("with_evidence on a fresh store");
        inner.signing_key = keys.signing_key.clone();
        inner.verifier = keys.agent_signers.as_deref().map(RecordVerifier::new);
        self
    }

    /// Every cluster's pool records on `commit` (what the promotion guard reads), as
    /// [`GitNotesStore::records`] accepts them.
    pub async fn pool_records(&self, commit: &str) -> Result<Vec<PoolRecord>, ReportError> {
        let records = self.records(commit).await?;
        Ok(records.into_iter().flat_map(|c| c.pools).collect())
    }

    /// Each cluster's records on `commit`, accepted only from that cluster's own notes ref
    /// and only about that cluster (a record naming another cluster is dropped); with agents'
    /// signers configured, only when signed by that cluster's key for this commit. A note
    /// that fails holds nothing: its cluster is left out, named in a warning.
    pub async fn records(&self, commit: &str) -> Result<Vec<ClusterRecords>, ReportError> {
        let clusters = self.inner.clusters_to_read();
        let inner = Arc::clone(&self.inner);
        let commit = commit.to_string();
        blocking(move || {
            Ok(inner
                .read_all(&commit, &clusters)?
                .into_iter()
                .filter(|v| v.records_accepted)
                .map(|v| ClusterRecords {
                    cluster: v.doc.cluster,
                    pools: v.doc.pools,
                })
                .collect())
        })
        .await
    }

    /// Every cluster's note document on `commit` (the declared clusters', see
    /// [`GitNotesStore::scope_to`]), as [`super::note_reader`] bounds and validates them, with
    /// only the records the store's policy accepts.
    pub async fn docs(&self, commit: &str) -> Result<Vec<NoteDoc>, ReportError> {
        let clusters = self.inner.clusters_to_read();
        let inner = Arc::clone(&self.inner);
        let commit = commit.to_string();
        blocking(move || {
            Ok(inner
                .read_all(&commit, &clusters)?
                .into_iter()
                .map(|v| v.doc)
                .collect())
        })
        .await
    }

    /// Read only these clusters' notes (the fleet's), each from its own ref by name; until
    /// called, only the store's own cluster's are read. Nothing else is ever read: a note
    /// under a ref no declared cluster owns holds nothing.
    pub fn scope_to(&self, clusters: impl IntoIterator<Item = String>) {
        *self.inner.scope.lock().expect("no panics under the lock") =
            Some(clusters.into_iter().collect());
    }

    /// The clusters (of those read) that have a notes ref here: their agents have reported
    /// at least once (on some commit).
    pub async fn reporting_clusters(
        &self,
    ) -> Result<std::collections::BTreeSet<String>, ReportError> {
        let inner = Arc::clone(&self.inner);
        let clusters = self.inner.clusters_to_read();
        blocking(move || {
            let repo = inner.open()?;
            Ok(inner
                .refs_by_cluster(&repo, &clusters)
                .into_keys()
                .collect())
        })
        .await
    }

    /// A fingerprint of every notes ref of these clusters (their tips): equal fingerprints,
    /// equal notes. For caches of what is computed from the notes (the fleet page).
    pub async fn fingerprint(
        &self,
        clusters: Vec<String>,
    ) -> Result<Vec<(String, Oid)>, ReportError> {
        Ok(self.tips(clusters).await?.fingerprint())
    }

    /// The notes refs of these clusters that exist, each with its tip, as of now: read the
    /// notes at exactly these tips with [`GitNotesStore::docs_at`], so that what is read is
    /// what the fingerprint says (and each ref is looked up once, not once for the
    /// fingerprint and again for the reading).
    pub async fn tips(&self, clusters: Vec<String>) -> Result<NotesTips, ReportError> {
        let inner = Arc::clone(&self.inner);
        blocking(move || {
            let repo = inner.open()?;
            Ok(NotesTips(
                inner
                    .refs_by_cluster(&repo, &clusters)
                    .into_iter()
                    .collect(),
            ))
        })
        .await
    }

    /// [`GitNotesStore::docs`] as of `tips` (from [`GitNotesStore::tips`]): each cluster's
    /// note on `commit` under the ref and at the tip recorded there.
    pub async fn docs_at(
        &self,
        commit: &str,
        tips: NotesTips,
    ) -> Result<Vec<NoteDoc>, ReportError> {
        Ok(self
            .sized_docs_at(commit, tips)
            .await?
            .into_iter()
            .map(|(d, _)| d)
            .collect())
    }

    /// [`GitNotesStore::docs_at`], each note with its size in bytes (what counts against
    /// [`note_reader::MAX_NOTES_BYTES_PER_COMMIT`]).
    pub async fn sized_docs_at(
        &self,
        commit: &str,
        tips: NotesTips,
    ) -> Result<Vec<(NoteDoc, u64)>, ReportError> {
        let inner = Arc::clone(&self.inner);
        let commit = commit.to_string();
        blocking(move || {
            Ok(inner
                .read_at(&commit, &tips.0)?
                .into_iter()
                .map(|(v, size)| (v.doc, size))
                .collect())
        })
        .await
    }

    /// Records this cluster's pool records on `commit` (written only on change).
    pub async fn set_pool_records(
        &self,
        commit: &str,
        records: Vec<PoolRecord>,
    ) -> Result<Posted, ReportError> {
        let mut records = records;
        records.sort_by(|a, b| (&a.cluster, &a.pool).cmp(&(&b.cluster, &b.pool)));
        self.write(commit, move |doc, _now| {
            if doc.pools == records {
                return false;
            }
            doc.pools = records.clone();
            true
        })
        .await
    }

    async fn write(
        &self,
        commit: &str,
        mutate: impl Fn(&mut NoteDoc, DateTime<Utc>) -> bool + Send + 'static,
    ) -> Result<Posted, ReportError> {
        let _one_writer = self.write_lock.lock().await;
        let inner = Arc::clone(&self.inner);
        let commit = commit.to_string();
        blocking(move || inner.write(&commit, &mutate)).await
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ReportError> + Send + 'static,
) -> Result<T, ReportError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(ReportError::Git {
            notes_ref: "refs/notes/rota/*".into(),
            message: format!("git notes task failed: {e}"),
        })
    })
}

impl Inner {
    fn git_err(&self, notes_ref: &str) -> impl Fn(git2::Error) -> ReportError + '_ {
        let notes_ref = notes_ref.to_string();
        move |e| ReportError::Git {
            notes_ref: notes_ref.clone(),
            message: e.message().to_string(),
        }
    }

    fn open(&self) -> Result<Repository, ReportError> {
        Repository::open(&self.repo).map_err(|e| ReportError::Git {
            notes_ref: NOTES_PREFIX.to_string() + "*",
            message: format!("opening {}: {}", self.repo.display(), e.message()),
        })
    }

    /// The clusters to read: the declared ones once known, else only our own.
    fn clusters_to_read(&self) -> Vec<String> {
        match &*self.scope.lock().expect("no panics under the lock") {
            Some(clusters) => clusters.iter().cloned().collect(),
            None => self.cluster.iter().cloned().collect(),
        }
    }

    /// The ref to read each of `clusters` from (those that have one), with its tip: our own
    /// local ref (we are its writer), the fetched copy for everyone else (fresher than any
    /// stale local ref). Every cluster asked for (the fleet's declared ones, or our own), each
    /// by name; never a glob, so refs no declared cluster owns are never read. One lookup a
    /// ref: at 10,000 clusters each lookup is a few system calls (a loose ref file, and for a
    /// miss libgit2 checks `packed-refs` again), which were a third of `status --fleet`.
    fn refs_by_cluster(
        &self,
        repo: &Repository,
        clusters: &[String],
    ) -> BTreeMap<String, (String, Oid)> {
        // A repo without fetched copies at all (the git server's own, as `rota status` and
        // `rota ui` read it) is asked for none: half the lookups, each a miss.
        let fetched_copies = has_fetched_notes(repo);
        let mut out = BTreeMap::new();
        for cluster in clusters {
            let own = self.cluster.as_deref() == Some(cluster.as_str());
            let fetched = fetched_copies.then(|| remote_notes_ref(cluster));
            let (first, second) = if own {
                (Some(notes_ref(cluster)), fetched)
            } else {
                (fetched, Some(notes_ref(cluster)))
            };
            if let Some((name, id)) = [first, second]
                .into_iter()
                .flatten()
                .find_map(|n| repo.refname_to_id(&n).ok().map(|id| (n, id)))
            {
                out.insert(cluster.clone(), (name, id));
            }
        }
        out
    }

    /// `cluster`'s note on `commit` under `notes_ref`, bounded and validated by
    /// [`note_reader`] (its records not yet judged by the policy). `Ok(None)`: no note.
    fn read_doc(
        &self,
        repo: &Repository,
        (notes_ref, tip): (&str, Oid),
        cluster: &str,
        commit: Oid,
    ) -> Result<Option<(NoteDoc, u64)>, ReportError> {
        let invalid = |why: String| ReportError::Git {
            notes_ref: notes_ref.to_string(),
            message: format!("note on {commit}: {why}"),
        };
        let (blob, size) =
            match note_reader::find_at(repo, tip, commit).map_err(self.git_err(notes_ref))? {
                None => return Ok(None),
                Some(Err(why)) => return Err(invalid(why.to_string())),
                Some(Ok(found)) => found,
            };
        let blob = repo.find_blob(blob).map_err(self.git_err(notes_ref))?;
        let doc =
            note_reader::parse(blob.content(), cluster).map_err(|e| invalid(e.to_string()))?;
        Ok(Some((doc, size)))
    }

    /// The records of `doc` the policy accepts: about its own cluster only, and with agents'
    /// signers only the signed ones for this cluster and commit. `None`: refused (named in a
    /// warning), so the note holds no records.
    fn accept_records(&self, commit: &str, doc: &NoteDoc) -> Option<Vec<PoolRecord>> {
        let cluster = &doc.cluster;
        let pools = match &self.verifier {
            None => doc.pools.clone(),
            Some(v) => match v.accept(cluster, commit, doc.signed.as_ref()) {
                Ok(Ok(mut pools)) => {
                    if let Err(why) = note_reader::vet_records(&mut pools) {
                        tracing::warn!(cluster = %cluster, commit = %commit, reason = %why,
                            "signed records refused: they hold nothing");
                        return None;
                    }
                    pools
                }
                Ok(Err(why)) => {
                    tracing::warn!(cluster = %cluster, commit = %commit, reason = %why,
                        "promotion records refused: they hold nothing");
                    return None;
                }
                Err(e) => {
                    tracing::warn!(cluster = %cluster, commit = %commit, reason = e.reason(),
                        error = %e, "promotion records not verified (retried next pass)");
                    return None;
                }
            },
        };
        let (own, foreign): (Vec<_>, Vec<_>) =
            pools.into_iter().partition(|r| &r.cluster == cluster);
        if !foreign.is_empty() {
            tracing::warn!(cluster = %cluster, commit = %commit, records = foreign.len(),
                "records about other clusters in this cluster's note are ignored");
        }
        Some(own)
    }

    /// The notes of `clusters` on `commit`, each vetted: bounded and validated, its records
    /// as the policy accepts them. One cluster's unreadable note never hides another's.
    fn read_all(&self, commit: &str, clusters: &[String]) -> Result<Vec<Vetted>, ReportError> {
        // In name order, as one pass reads them (the budget cuts the same notes).
        let mut clusters = clusters.to_vec();
        clusters.sort();
        clusters.dedup();
        Ok(self
            .read_chunks(commit, &clusters, |repo, part| {
                self.refs_by_cluster(repo, part).into_iter().collect()
            })?
            .into_iter()
            .map(|(v, _)| v)
            .collect())
    }

    /// [`Inner::read_all`] under refs already looked up (`refs`: in cluster order, each
    /// cluster once, as [`NotesTips`] holds them).
    fn read_at(
        &self,
        commit: &str,
        refs: &[(String, (String, Oid))],
    ) -> Result<Vec<(Vetted, u64)>, ReportError> {
        self.read_chunks(commit, refs, |_, part| part.to_vec())
    }

    /// The notes on `commit` of the refs `refs_of` finds for each chunk of `items`.
    /// 10,000 clusters' notes are read on every core, in chunks of clusters joined in
    /// order. The byte budget holds as in one pass: a chunk stops once its own notes pass
    /// the budget (so no thread reads much past it), and the join keeps a note only while
    /// the notes before it, in cluster order, are within the budget.
    fn read_chunks<T: Sync>(
        &self,
        commit: &str,
        items: &[T],
        refs_of: impl Fn(&Repository, &[T]) -> Vec<(String, (String, Oid))> + Sync,
    ) -> Result<Vec<(Vetted, u64)>, ReportError> {
        let oid = Oid::from_str(commit)
            .map_err(|_| ReportError::Invalid(format!("not a commit id: {commit}")))?;
        let chunks = rota_core::parallel::in_chunks(items, |part| {
            let repo = self.open()?;
            let refs = refs_of(&repo, part);
            Ok::<_, ReportError>(self.read_chunk(&repo, commit, oid, refs))
        })
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
        let mut out = Vec::new();
        let mut bytes = 0u64;
        for (v, size) in chunks.into_iter().flatten() {
            if bytes > note_reader::MAX_NOTES_BYTES_PER_COMMIT {
                tracing::warn!(commit = %commit, cluster = %v.doc.cluster, read = bytes,
                    "the notes on this commit add up to more than the limit: the rest are not read");
                break;
            }
            bytes += size;
            out.push((v, size));
        }
        Ok(out)
    }

    /// The notes under `refs` on `commit`, in order, each with its size; stops once they
    /// pass the commit's byte budget.
    fn read_chunk(
        &self,
        repo: &Repository,
        commit: &str,
        oid: Oid,
        refs: Vec<(String, (String, Oid))>,
    ) -> Vec<(Vetted, u64)> {
        let mut out = Vec::new();
        let mut bytes = 0u64;
        for (cluster, (r, tip)) in refs {
            if bytes > note_reader::MAX_NOTES_BYTES_PER_COMMIT {
                break;
            }
            match self.read_doc(repo, (&r, tip), &cluster, oid) {
                Ok(Some((mut doc, size))) => {
                    bytes += size;
                    let accepted = self.accept_records(commit, &doc);
                    let records_accepted = accepted.is_some();
                    doc.pools = accepted.unwrap_or_default();
                    // Judged: the signature is of no more use to a reader.
                    doc.signed = None;
                    out.push((
                        Vetted {
                            doc,
                            records_accepted,
                        },
                        size,
                    ));
                }
                Ok(None) => {}
                // Skipping it is safe for the guard: a pool without records completed nothing.
                Err(e) => tracing::warn!(cluster = %cluster, error = %e, "skipping a status note"),
            }
        }
        out
    }

    fn write(
        &self,
        commit: &str,
        mutate: &dyn Fn(&mut NoteDoc, DateTime<Utc>) -> bool,
    ) -> Result<Posted, ReportError> {
        let cluster = self.cluster.as_deref().ok_or_else(|| {
            ReportError::Config("this git-notes store is read-only (no cluster to write as)".into())
        })?;
        let local = notes_ref(cluster);
        let remote = remote_notes_ref(cluster);
        let err = self.git_err(&local);
        let repo = self.open()?;
        let oid = Oid::from_str(commit)
            .map_err(|_| ReportError::Invalid(format!("not a commit id: {commit}")))?;
        // A fresh mirror (new pod) continues the history it finds on the remote instead of
        // starting a new one that could never be pushed.
        if repo.refname_to_id(&local).is_err()
            && let Ok(id) = repo.refname_to_id(&remote)
        {
            repo.reference(&local, id, false, "rota: adopt the pushed notes")
                .map_err(&err)?;
        }
        let posted = self.note_locally(&repo, &local, cluster, oid, mutate)?;
        if posted == Posted::Unchanged {
            return Ok(posted);
        }
        let Some(push) = &self.push else {
            return Ok(posted);
        };
        match push_ref(&repo, push, &local) {
            Ok(()) => Ok(posted),
            Err(first) => {
                // Rejected: the remote moved (a previous incarnation of this agent pushed
                // notes this mirror never saw). Take the remote history and redo the change
                // on top of it, once.
                tracing::info!(notes_ref = %local, error = %first, "notes push rejected; rebasing on the remote notes");
                fetch_ref(&repo, push, &local, &remote).map_err(&err)?;
                let id = repo.refname_to_id(&remote).map_err(&err)?;
                repo.reference(&local, id, true, "rota: reset to the pushed notes")
                    .map_err(&err)?;
                self.note_locally(&repo, &local, cluster, oid, mutate)?;
                push_ref(&repo, push, &local).map_err(|m| ReportError::Git {
                    notes_ref: local.clone(),
                    message: format!("pushing to {}: {m}", crate::source::redact_url(&push.url)),
                })?;
                Ok(Posted::Created)
            }
        }
    }

    fn note_locally(
        &self,
        repo: &Repository,
        local: &str,
        cluster: &str,
        oid: Oid,
        mutate: &dyn Fn(&mut NoteDoc, DateTime<Utc>) -> bool,
    ) -> Result<Posted, ReportError> {
        let read = match repo.refname_to_id(local) {
            Ok(tip) => self.read_doc(repo, (local, tip), cluster, oid),
            Err(_) => Ok(None),
        };
        let mut doc = match read {
            Ok(Some((d, _))) => d,
            Ok(None) => NoteDoc {
                cluster: cluster.to_string(),
                ..NoteDoc::default()
            },
            Err(e) => {
                // We are the only writer of this ref: a note we cannot read was not written
                // by rota as it is now; replace it rather than stop reporting forever.
                tracing::warn!(error = %e, "replacing an unreadable status note");
                NoteDoc {
                    cluster: cluster.to_string(),
                    ..NoteDoc::default()
                }
            }
        };
        let changed = mutate(&mut doc, Utc::now());
        let payload = self
            .signing_key
            .as_ref()
            .map(|_| evidence::payload(cluster, &oid.to_string(), &doc.pools));
        let signed_as_is = match (&payload, &doc.signed) {
            (None, _) => true,
            (Some(p), Some(s)) => &s.payload == p,
            (Some(_), None) => false,
        };
        if !changed && signed_as_is {
            return Ok(Posted::Unchanged);
        }
        if let (Some(key), Some(p)) = (&self.signing_key, &payload)
            && !signed_as_is
        {
            doc.signed = Some(evidence::sign(key, p).map_err(|e| ReportError::Git {
                notes_ref: local.to_string(),
                message: e.to_string(),
            })?);
        }
        let text = serde_json::to_string_pretty(&doc).expect("serialisable") + "\n";
        if text.len() as u64 > note_reader::MAX_NOTE_BYTES {
            // Readers would refuse it whole: say so rather than write what nobody reads.
            return Err(ReportError::Invalid(format!(
                "the note of {cluster} on {oid} would be {} bytes, over the {} readers accept",
                text.len(),
                note_reader::MAX_NOTE_BYTES
            )));
        }
        let sig = git2::Signature::now("rota", &format!("rota+{cluster}@rota.dev"))
            .map_err(self.git_err(local))?;
        repo.note(&sig, &sig, Some(local), oid, &text, true)
            .map_err(self.git_err(local))?;
        Ok(Posted::Created)
    }
}

fn remote_for<'r>(
    repo: &'r Repository,
    push: &PushTarget,
) -> Result<git2::Remote<'r>, git2::Error> {
    repo.remote_anonymous(&crate::source::normalise_url(&push.url))
}

/// Pushes `local` to the same name, fast-forward only. Errors carry the remote's reason.
fn push_ref(repo: &Repository, push: &PushTarget, local: &str) -> Result<(), String> {
    push_refspec(repo, push, &format!("{local}:{local}"))
}

/// Pushes one refspec (`+` forces) to `push.url` with its credentials and host keys. Errors
/// carry the remote's reason (a rejected update names the ref). Blocking.
pub fn push_refspec(repo: &Repository, push: &PushTarget, spec: &str) -> Result<(), String> {
    let mut remote = remote_for(repo, push).map_err(|e| e.message().to_string())?;
    let rejected = RefCell::new(None);
    let refusal = credentials::Refusal::default();
    {
        let mut cbs =
            credentials::callbacks(&push.auth, &push.url, push.known_hosts.as_ref(), &refusal);
        // The server writes the reason of a rejected update (a hook's text) and libgit2's
        // errors carry its `ERR` lines: both are the server's text, made safe to print.
        cbs.push_update_reference(|refname, status| {
            if let Some(s) = status {
                *rejected.borrow_mut() = Some(format!(
                    "{} rejected: {}",
                    rota_core::sanitize::line(refname),
                    rota_core::sanitize::line(s)
                ));
            }
            Ok(())
        });
        let mut opts = PushOptions::new();
        opts.remote_callbacks(cbs);
        remote.push(&[spec], Some(&mut opts)).map_err(|e| {
            rota_core::sanitize::text(&credentials::explain(&e, &refusal)).into_owned()
        })?;
    }
    match rejected.into_inner() {
        Some(reason) => Err(reason),
        None => Ok(()),
    }
}

pub(crate) fn fetch_ref(
    repo: &Repository,
    push: &PushTarget,
    from: &str,
    into: &str,
) -> Result<(), git2::Error> {
    let mut remote = remote_for(repo, push)?;
    let refusal = credentials::Refusal::default();
    let mut opts = git2::FetchOptions::new();
    opts.remote_callbacks(credentials::callbacks(
        &push.auth,
        &push.url,
        push.known_hosts.as_ref(),
        &refusal,
    ));
    remote
        .fetch(&[format!("+{from}:{into}")], Some(&mut opts), None)
        .map_err(|e| {
            git2::Error::from_str(&rota_core::sanitize::text(&credentials::explain(
                &e, &refusal,
            )))
        })
}

#[async_trait]
impl StatusStore for GitNotesStore {
    fn backend(&self) -> &'static str {
        "git-notes"
    }

    async fn list(&self, commit: &str) -> Result<Vec<CommitStatus>, ReportError> {
        let mut out: Vec<CommitStatus> = self
            .docs(commit)
            .await?
            .iter()
            .flat_map(|d| d.statuses.iter().map(NoteStatus::status))
            .collect();
        out.sort_by(|a, b| a.context.cmp(&b.context));
        Ok(out)
    }

    async fn set(&self, commit: &str, status: &CommitStatus) -> Result<Posted, ReportError> {
        validate(commit, status)?;
        if let Some(cluster) = &self.inner.cluster {
            let own = super::status::cluster_context(cluster);
            if status.context != own && !status.context.starts_with(&format!("{own}/")) {
                return Err(ReportError::Invalid(format!(
                    "{} is not a context of cluster {cluster}: each agent writes only its own notes",
                    status.context
                )));
            }
        }
        let status = status.clone();
        self.write(commit, move |doc, now| {
            if let Some(existing) = doc
                .statuses
                .iter_mut()
                .find(|s| s.context == status.context)
            {
                if status.same_as(&existing.status()) && status.stop == existing.stop {
                    return false;
                }
                *existing = NoteStatus {
                    context: status.context.clone(),
                    state: status.state,
                    description: status.description.clone(),
                    target_url: status.target_url.clone(),
                    updated_at: now,
                    stop: status.stop.clone(),
                };
            } else {
                doc.statuses.push(NoteStatus {
                    context: status.context.clone(),
                    state: status.state,
                    description: status.description.clone(),
                    target_url: status.target_url.clone(),
                    updated_at: now,
                    stop: status.stop.clone(),
                });
                doc.statuses.sort_by(|a, b| a.context.cmp(&b.context));
            }
            true
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lookups skipped for a repo without fetched copies must not be skipped for a repo
    /// that has some, loose or packed: there the fetched copy is the fresher one.
    #[test]
    fn notes_are_read_at_the_tips_looked_up_though_a_ref_moves_after() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
                .args(args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        let note = |description: &str| {
            serde_json::json!({"cluster": "a", "pools": [], "statuses": [{"context": "rota/a",
                "state": "success", "description": description,
                "updatedAt": "2026-11-22T03:00:00Z"}]})
            .to_string()
        };
        git(&["init", "-q", "-b", "main"]);
        git(&["commit", "-q", "--allow-empty", "-m", "fleet"]);
        let head = git(&["rev-parse", "HEAD"]);
        git(&[
            "notes",
            "--ref",
            "rota/a",
            "add",
            "-m",
            &note("first"),
            &head,
        ]);
        let store = GitNotesStore::new(dir.path(), None, None);
        store.scope_to(["a".to_string(), "b".to_string()]);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let clusters = vec!["a".to_string(), "b".to_string()];
        let tips = rt.block_on(store.tips(clusters.clone())).unwrap();
        assert_eq!(tips.fingerprint().len(), 1, "b has no notes ref: {tips:?}");

        git(&[
            "notes",
            "--ref",
            "rota/a",
            "add",
            "-f",
            "-m",
            &note("second"),
            &head,
        ]);
        let described = |docs: Vec<NoteDoc>| -> Vec<String> {
            docs.into_iter()
                .flat_map(|d| d.statuses)
                .map(|s| s.description)
                .collect()
        };
        let at_tips = rt.block_on(store.docs_at(&head, tips.clone())).unwrap();
        assert_eq!(
            described(at_tips),
            ["first"],
            "read where the fingerprint says"
        );
        assert_eq!(
            described(rt.block_on(store.docs(&head)).unwrap()),
            ["second"]
        );
        assert_ne!(
            rt.block_on(store.fingerprint(clusters)).unwrap(),
            tips.fingerprint()
        );
        assert!(
            rt.block_on(store.docs_at(&head, tips.only(|c| c == "b")))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn fetched_copies_are_seen_loose_or_packed_and_absent_only_when_absent() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let sig = git2::Signature::now("t", "t@example.com").unwrap();
        let tree = repo.treebuilder(None).unwrap().write().unwrap();
        let tree = repo.find_tree(tree).unwrap();
        let c = repo.commit(None, &sig, &sig, "n", &tree, &[]).unwrap();
        repo.reference(&notes_ref("a"), c, true, "t").unwrap();
        assert!(!has_fetched_notes(&repo), "only local notes refs");

        repo.reference(&remote_notes_ref("a"), c, true, "t")
            .unwrap();
        assert!(has_fetched_notes(&repo), "a loose fetched copy");

        // Packed, as `git pack-refs --all` leaves them: no loose folder any more.
        let ok = std::process::Command::new("git")
            .args(["pack-refs", "--all"])
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(ok.success());
        assert!(!dir.path().join("refs/rota/remote-notes/a").exists());
        let _ = std::fs::remove_dir_all(dir.path().join("refs/rota"));
        assert!(has_fetched_notes(&repo), "a packed fetched copy");
    }
}
