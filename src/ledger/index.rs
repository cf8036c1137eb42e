//! A per-image index of the ledgers, for `rota audit` and `rota evidence`: built from the
//! ledgers and kept as a cache beside the repo's objects (`<git dir>/rota-ledger-index/`),
//! brought up to date incrementally from what was appended since.
//!
//! Without it, "which nodes ran image X" reads every month file of every cluster: 140,000
//! blobs for a year of 10,000 clusters. The ledger's own layout makes an incremental index
//! exact and cheap: a closed life is written once and never changes, and a month file is
//! only appended to. So the index keeps, per cluster, the tip it has read and how many bytes
//! of each month file; a new tip means reading only the bytes after those (the new closed
//! lives), filed into one file per image (`closed/<key>.jsonl`, the lines as the ledger
//! holds them). The open lives change with every append and are few: each cluster's
//! `open.jsonl` is copied whole (`open/<key>.jsonl`), and all of them into one `open.jsonl`
//! that a query reads. What was read of each cluster's month files is in `read/<key>.json`,
//! read only when that cluster's ledger moved; `state.json` (the tips, the image files'
//! lengths, each version's images) stays small enough to read on every query.
//!
//! What keeps it right:
//! - The bytes of a month file the index has read are checked against the hash it kept; a
//!   ledger whose history was rewritten (which `rota audit --verify` names) or removed makes
//!   the index start over from the ledgers, never answer from what it no longer holds.
//! - An update appends to the image files first and writes its state last (renamed into
//!   place); an update cut short leaves image files longer than the state says, and the
//!   next one cuts them back first.
//! - One update at a time (`lock`, created exclusively); while another holds it, or when the
//!   folder cannot be written (a read-only repo), the caller reads the ledgers directly.
//!
//! It is a cache: deleting the folder loses nothing, and `--verify` never reads it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository};
use serde::{Deserialize, Serialize};

use super::error::LedgerError;
use super::refs::ledger_ref;
use rota_core::ledger::{Filter, LIVES_DIR, Life, OPEN_FILE, parse_lines};

/// The folder of the index, in the repository's git directory.
pub const INDEX_DIR: &str = "rota-ledger-index";
/// Bumped when the layout changes: an index of another format is rebuilt.
const FORMAT: u32 = 2;
/// A lock older than this is from an update that died: it is taken over.
const STALE_LOCK: std::time::Duration = std::time::Duration::from_secs(600);

/// What the index has read. Small enough to read on every query (a query with nothing new
/// reads it, resolves the ledger refs and reads the image's file and `open.jsonl`): what
/// was read of each month file is kept per cluster in `read/<key>.json`, read only when
/// that cluster's ledger moved.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    format: u32,
    /// Per cluster: the tip read.
    clusters: BTreeMap<String, String>,
    /// The length of each `closed/` file as of this state.
    files: BTreeMap<String, u64>,
    /// `channel@version` -> the image IDs its lives ran (a query by version reads these).
    versions: BTreeMap<String, BTreeSet<String>>,
}

/// What was read of one cluster's ledger, as of `tip`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Read {
    tip: String,
    /// Month file name (`2026-11.jsonl`) -> (bytes read, hash of those bytes).
    months: BTreeMap<String, (usize, String)>,
}

/// Why an update cannot go on from the index as it is.
enum Stale {
    /// The ledgers no longer hold what the index read: start over.
    Rebuild,
    /// A ledger line that does not read: the caller reports it (as a direct read would).
    Ledger(LedgerError),
    /// The cache's own files: the caller reads the ledgers directly.
    Io(String),
}

impl From<std::io::Error> for Stale {
    fn from(e: std::io::Error) -> Self {
        Stale::Io(e.to_string())
    }
}

/// The key a name is filed under: the hash of the name (image IDs and cluster names may
/// hold `/` or be long; a hash is always a file name).
fn key(name: &str) -> String {
    Oid::hash_object(ObjectType::Blob, name.as_bytes())
        .map(|o| o.to_string())
        .unwrap_or_else(|_| name.replace(|c: char| !c.is_ascii_alphanumeric(), "_"))
}

fn hash(bytes: &[u8]) -> String {
    Oid::hash_object(ObjectType::Blob, bytes)
        .map(|o| o.to_string())
        .unwrap_or_default()
}

/// The exclusive right to update the index; released when dropped.
struct Lock(PathBuf);

impl Lock {
    fn take(dir: &Path) -> Option<Lock> {
        let path = dir.join("lock");
        let stale = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE_LOCK));
        if stale {
            let _ = std::fs::remove_file(&path);
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .ok()
            .map(|_| Lock(path))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Every life across the ledgers of `repo` that `filter` matches, from the index after
/// bringing it up to date: with `filter.image` (an image ID or `channel@version`) only that
/// image's file is read, without it every image's (still local files, not git objects).
/// `Ok(None)`: the index cannot be used now (another update holds it, or it cannot be
/// written): read the ledgers directly. A ledger line that does not read is an error, named
/// as [`super::read_lives`] names it.
pub fn indexed_lives(repo: &Repository, filter: &Filter) -> Result<Option<Vec<Life>>, LedgerError> {
    let dir = repo.path().join(INDEX_DIR);
    if ["closed", "open", "read"]
        .iter()
        .any(|d| std::fs::create_dir_all(dir.join(d)).is_err())
    {
        return Ok(None);
    }
    let Some(_lock) = Lock::take(&dir) else {
        return Ok(None);
    };
    let state = match update(repo, &dir, load(&dir)) {
        Ok(s) => s,
        Err(Stale::Rebuild) => {
            tracing::info!("the ledger index no longer matches the ledgers: rebuilding it");
            wipe(&dir);
            match update(repo, &dir, State::default()) {
                Ok(s) => s,
                Err(Stale::Ledger(e)) => return Err(e),
                Err(_) => return Ok(None),
            }
        }
        Err(Stale::Ledger(e)) => return Err(e),
        Err(Stale::Io(e)) => {
            tracing::warn!(error = %e, "the ledger index cannot be written: reading the ledgers");
            return Ok(None);
        }
    };
    let files: BTreeSet<String> = match &filter.image {
        Some(image) => {
            let mut images: BTreeSet<&str> = [image.as_str()].into();
            if let Some(of_version) = state.versions.get(image) {
                images.extend(of_version.iter().map(String::as_str));
            }
            images.iter().map(|i| format!("{}.jsonl", key(i))).collect()
        }
        None => state.files.keys().cloned().collect(),
    };
    let mut out = Vec::new();
    for f in files {
        out.extend(matching(&dir.join("closed").join(f), filter));
    }
    out.extend(matching(&dir.join(OPEN_FILE), filter));
    Ok(Some(out))
}

/// The lives of an index file that `filter` matches (the file holds only lines that read:
/// they were checked when filed).
fn matching(path: &Path, filter: &Filter) -> Vec<Life> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let needle = filter.needle();
    text.lines()
        .filter(|l| needle.as_ref().is_none_or(|n| l.contains(n.as_str())))
        .filter_map(|l| serde_json::from_str::<Life>(l).ok())
        .filter(|l| filter.matches(l))
        .collect()
}

fn load(dir: &Path) -> State {
    std::fs::read(dir.join("state.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<State>(&b).ok())
        .filter(|s| s.format == FORMAT)
        .unwrap_or_default()
}

fn wipe(dir: &Path) {
    for sub in ["closed", "open", "read"] {
        let _ = std::fs::remove_dir_all(dir.join(sub));
        let _ = std::fs::create_dir_all(dir.join(sub));
    }
    let _ = std::fs::remove_file(dir.join("state.json"));
}

/// Brings the index in `dir` from `state` to the ledgers' tips; returns the new state
/// (written).
fn update(repo: &Repository, dir: &Path, mut state: State) -> Result<State, Stale> {
    state.format = FORMAT;
    cut_back(dir, &state)?;
    let clusters = super::book::clusters(repo).map_err(Stale::Ledger)?;
    if state.clusters.keys().any(|c| !clusters.contains(c)) {
        // A ledger ref removed: its lives are in the image files and cannot be taken out.
        return Err(Stale::Rebuild);
    }
    let mut appended: BTreeMap<String, String> = BTreeMap::new();
    let mut reads: Vec<(PathBuf, Read)> = Vec::new();
    let mut changed = false;
    for c in &clusters {
        let name = ledger_ref(c);
        let tip = repo
            .refname_to_id(&name)
            .map_err(|e| Stale::Ledger(LedgerError::git(&name)(e)))?;
        let known = state.clusters.get(c).cloned().unwrap_or_default();
        if known == tip.to_string() {
            continue;
        }
        changed = true;
        // What was read of it, as of the tip the state names (a file of another tip is from
        // an update cut short: its lengths are not those of the image files).
        let path = dir.join("read").join(format!("{}.json", key(c)));
        let mut read = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice::<Read>(&b).map_err(|_| Stale::Rebuild)?,
            Err(_) => Read::default(),
        };
        if read.tip != known {
            return Err(Stale::Rebuild);
        }
        let lives = read_new(repo, c, tip, &mut read, &mut appended)?;
        reads.push((path, read));
        for l in lives {
            if let Some(v) = l.version {
                state.versions.entry(v).or_default().insert(l.image);
            }
        }
        state.clusters.insert(c.clone(), tip.to_string());
    }
    if !changed {
        return Ok(state);
    }
    // Every cluster's open lives in one file, so that a query reads one file for them.
    let mut open = String::new();
    for c in &clusters {
        let path = dir.join("open").join(format!("{}.jsonl", key(c)));
        open += &std::fs::read_to_string(path).unwrap_or_default();
    }
    std::fs::write(dir.join(OPEN_FILE), open)?;
    for (k, text) in &appended {
        let file = format!("{k}.jsonl");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("closed").join(&file))?;
        f.write_all(text.as_bytes())?;
        *state.files.entry(file).or_default() += text.len() as u64;
    }
    // Before the state: a cut update leaves read files of tips the state does not name
    // (rebuilt), never a state whose read files are missing.
    for (path, read) in &reads {
        std::fs::write(path, serde_json::to_vec(read).expect("serialisable"))?;
    }
    let tmp = dir.join("state.json.tmp");
    std::fs::write(&tmp, serde_json::to_vec(&state).expect("serialisable"))?;
    std::fs::rename(&tmp, dir.join("state.json"))?;
    Ok(state)
}

/// Cuts each image file back to the length the state recorded (what an update cut short
/// appended beyond it is read again), and removes files the state does not know.
fn cut_back(dir: &Path, state: &State) -> Result<(), Stale> {
    for e in std::fs::read_dir(dir.join("closed"))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        match state.files.get(&name) {
            Some(&len) if e.metadata()?.len() >= len => {
                if e.metadata()?.len() > len {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .open(e.path())?
                        .set_len(len)?;
                }
            }
            Some(_) => return Err(Stale::Rebuild),
            None => std::fs::remove_file(e.path())?,
        }
    }
    if state
        .files
        .keys()
        .any(|f| !dir.join("closed").join(f).exists())
    {
        return Err(Stale::Rebuild);
    }
    Ok(())
}

/// Reads what `cluster`'s ledger holds at `tip` beyond what `read` says was read: the new
/// lines of each month file (filed into `appended` by image key) and the open lives (copied
/// whole). Returns every life read, for the version map.
fn read_new(
    repo: &Repository,
    cluster: &str,
    tip: Oid,
    read: &mut Read,
    appended: &mut BTreeMap<String, String>,
) -> Result<Vec<Life>, Stale> {
    let name = ledger_ref(cluster);
    let git = |e: git2::Error| Stale::Ledger(LedgerError::git(&name)(e));
    let unreadable = |source| {
        Stale::Ledger(LedgerError::Unreadable {
            ledger_ref: name.clone(),
            commit: tip.to_string(),
            source,
        })
    };
    let tree = repo.find_commit(tip).and_then(|c| c.tree()).map_err(git)?;
    let mut months: BTreeMap<String, Oid> = BTreeMap::new();
    if let Ok(entry) = tree.get_path(Path::new(LIVES_DIR)) {
        for e in repo.find_tree(entry.id()).map_err(git)?.iter() {
            if let Ok(n) = e.name() {
                months.insert(n.to_string(), e.id());
            }
        }
    }
    if read.months.keys().any(|m| !months.contains_key(m)) {
        return Err(Stale::Rebuild);
    }
    let mut lives = Vec::new();
    for (month, id) in months {
        let blob = repo.find_blob(id).map_err(git)?;
        let bytes = blob.content();
        let (done, done_hash) = read.months.get(&month).cloned().unwrap_or_default();
        if bytes.len() < done || (done > 0 && hash(&bytes[..done]) != done_hash) {
            return Err(Stale::Rebuild);
        }
        if bytes.len() == done {
            continue;
        }
        let file = format!("{LIVES_DIR}/{month}");
        let before = String::from_utf8_lossy(&bytes[..done]).lines().count();
        let new = String::from_utf8_lossy(&bytes[done..]).into_owned();
        for (i, line) in new.lines().enumerate() {
            if line.is_empty() {
                continue;
            }
            let life = parse_lines(&file, line)
                .map_err(|mut e| {
                    e.line = before + i + 1;
                    unreadable(e)
                })?
                .remove(0);
            let text = appended.entry(key(&life.image)).or_default();
            text.push_str(line);
            text.push('\n');
            lives.push(life);
        }
        read.months.insert(month, (bytes.len(), hash(bytes)));
    }
    let open = match tree.get_path(Path::new(OPEN_FILE)) {
        Ok(e) => {
            let blob = repo.find_blob(e.id()).map_err(git)?;
            String::from_utf8_lossy(blob.content()).into_owned()
        }
        Err(_) => String::new(),
    };
    lives.extend(parse_lines(OPEN_FILE, &open).map_err(unreadable)?);
    let dir = repo.path().join(INDEX_DIR).join("open");
    std::fs::write(dir.join(format!("{}.jsonl", key(cluster))), open)?;
    read.tip = tip.to_string();
    Ok(lives)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::book::{append, read_book, read_lives};
    use chrono::{DateTime, Utc};
    use rota_core::ledger::{PoolContext, Seen, Start, diff};

    fn t(min: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-30T23:50:00Z")
            .unwrap()
            .with_timezone(&Utc)
            + chrono::Duration::minutes(min)
    }

    fn seen(node: &str, image: &str) -> Seen {
        Seen {
            pool: "general".into(),
            node: node.into(),
            instance: format!("i-{node}"),
            image: Some(image.into()),
            ready: true,
            cordoned: None,
        }
    }

    fn step(repo: &Repository, cluster: &str, seen: &[Seen], at: DateTime<Utc>) {
        let ctx = PoolContext {
            versions: [("ami-1", "general@1"), ("ami-2", "general@2")]
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect(),
            ..PoolContext::default()
        };
        let pools: BTreeMap<String, PoolContext> = [("general".to_string(), ctx)].into();
        let book = read_book(repo, cluster).unwrap();
        let d = diff(cluster, &book.open, seen, &pools, Start::Continuing, at);
        append(repo, cluster, book, &d, at, None).unwrap();
    }

    fn keys(lives: &[Life]) -> Vec<(String, String, Option<DateTime<Utc>>)> {
        let mut k: Vec<_> = lives
            .iter()
            .map(|l| (l.cluster.clone(), l.node.clone(), l.left))
            .collect();
        k.sort();
        k
    }

    fn direct(repo: &Repository, filter: &Filter) -> Vec<Life> {
        ["a", "b"]
            .iter()
            .flat_map(|c| read_lives(repo, c, filter).unwrap())
            .collect()
    }

    #[test]
    fn the_index_answers_as_the_ledgers_do_through_appends_cut_updates_and_rewrites() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        for c in ["a", "b"] {
            step(&repo, c, &[seen("n1", "ami-1"), seen("n2", "ami-1")], t(0));
            step(&repo, c, &[seen("n2", "ami-1"), seen("n3", "ami-2")], t(5));
        }
        let by = |image: &str| Filter {
            image: Some(image.into()),
            ..Filter::default()
        };
        for f in [by("general@1"), by("ami-2"), by("general@2")] {
            let got = indexed_lives(&repo, &f)
                .unwrap()
                .expect("the index is usable");
            assert_eq!(keys(&got), keys(&direct(&repo, &f)), "{f:?}");
        }
        assert_eq!(
            indexed_lives(&repo, &by("general@1"))
                .unwrap()
                .unwrap()
                .len(),
            4
        );
        // Without an image: every image's file (a node's lives, a cluster's, the evidence's).
        for f in [
            Filter::default(),
            Filter {
                node: Some("n2".into()),
                cluster: Some("b".into()),
                ..Filter::default()
            },
        ] {
            let got = indexed_lives(&repo, &f).unwrap().unwrap();
            assert_eq!(keys(&got), keys(&direct(&repo, &f)), "{f:?}");
        }

        // Appended since: n2 leaves in December (a new month file), n3 stays open.
        step(&repo, "a", &[seen("n3", "ami-2")], t(15));
        let f = by("general@1");
        let got = indexed_lives(&repo, &f).unwrap().unwrap();
        assert_eq!(keys(&got), keys(&direct(&repo, &f)));
        assert!(
            got.iter().filter(|l| l.left.is_some()).count() == 3,
            "{got:#?}"
        );

        // An update cut short after appending to an image file: cut back, not read twice.
        let idx = repo.path().join(INDEX_DIR);
        let file = idx.join("closed").join(format!("{}.jsonl", key("ami-1")));
        let extra = std::fs::read_to_string(&file).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap()
            .write_all(extra.as_bytes())
            .unwrap();
        step(&repo, "b", &[], t(20));
        let got = indexed_lives(&repo, &f).unwrap().unwrap();
        assert_eq!(keys(&got), keys(&direct(&repo, &f)));

        // A ledger rewritten (its month file's earlier lines changed): rebuilt, not trusted.
        let tip = repo.refname_to_id(&ledger_ref("a")).unwrap();
        let commit = repo.find_commit(tip).unwrap();
        let tree = commit.tree().unwrap();
        let lives_tree = repo
            .find_tree(tree.get_path(Path::new(LIVES_DIR)).unwrap().id())
            .unwrap();
        let mut lb = repo.treebuilder(Some(&lives_tree)).unwrap();
        lb.insert("2026-11.jsonl", repo.blob(b"").unwrap(), 0o100644)
            .unwrap();
        let lives_id = lb.write().unwrap();
        let mut root = repo.treebuilder(Some(&tree)).unwrap();
        root.insert(LIVES_DIR, lives_id, 0o040000).unwrap();
        let new_tree = repo.find_tree(root.write().unwrap()).unwrap();
        let sig = git2::Signature::now("x", "x@example.com").unwrap();
        repo.commit(
            Some(&ledger_ref("a")),
            &sig,
            &sig,
            "rewrite",
            &new_tree,
            &[&commit],
        )
        .unwrap();
        let got = indexed_lives(&repo, &f).unwrap().unwrap();
        assert_eq!(keys(&got), keys(&direct(&repo, &f)));

        // Held by another update: not used (the caller reads the ledgers).
        let _held = Lock::take(&idx).unwrap();
        assert!(indexed_lives(&repo, &f).unwrap().is_none());
    }
}
