//! Reading and appending one cluster's ledger in a git repository (blocking git2 calls: run
//! them off the async runtime).
//!
//! An append reads the tip's `open.jsonl`, applies the [`Delta`], appends the closed lives to
//! their month files (`lives/YYYY-MM.jsonl`, the month each left in) and commits the new tree
//! with the tip as its only parent, moving the ref only if it still points at that tip (a
//! compare-and-swap: two writers cannot both append on one tip). Month files are only ever
//! appended to, so a closed month's blob never changes again and git's packs store each
//! version of the current month as a delta of the one before.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use git2::{Oid, Repository};

use super::error::LedgerError;
use super::refs::{LEDGER_PREFIX, ledger_ref, signed_payload};
use rota_core::ledger::{
    Delta, Filter, LIVES_DIR, Life, OPEN_FILE, month_file, month_in, parse_lines,
};

/// A cluster's ledger at its tip: the open lives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Book {
    pub tip: Option<Oid>,
    pub open: Vec<Life>,
}

/// The clusters with a ledger in `repo` (sorted), from the refs under `refs/rota/ledger/`.
pub fn clusters(repo: &Repository) -> Result<Vec<String>, LedgerError> {
    let err = LedgerError::git(LEDGER_PREFIX);
    let mut out = Vec::new();
    for r in repo
        .references_glob(&format!("{LEDGER_PREFIX}*"))
        .map_err(&err)?
    {
        let r = r.map_err(&err)?;
        if let Some(name) = r.name().ok().and_then(|n| n.strip_prefix(LEDGER_PREFIX)) {
            out.push(name.to_string());
        }
    }
    out.sort();
    Ok(out)
}

/// The text of `path` in `tree` (None when absent).
fn file_text(
    repo: &Repository,
    tree: &git2::Tree,
    path: &str,
) -> Result<Option<String>, git2::Error> {
    let Ok(entry) = tree.get_path(Path::new(path)) else {
        return Ok(None);
    };
    let blob = repo.find_blob(entry.id())?;
    Ok(Some(String::from_utf8_lossy(blob.content()).into_owned()))
}

/// The open lives of `cluster`'s ledger (none and no tip when it has no ledger yet).
pub fn read_book(repo: &Repository, cluster: &str) -> Result<Book, LedgerError> {
    let name = ledger_ref(cluster);
    let Ok(tip) = repo.refname_to_id(&name) else {
        return Ok(Book::default());
    };
    let err = LedgerError::git(&name);
    let tree = repo.find_commit(tip).and_then(|c| c.tree()).map_err(&err)?;
    // Parsed from the blob's own bytes: at 5,000 nodes `open.jsonl` is about 2 MB, and an
    // owned copy of it beside the blob and the lives parsed from it was a third of that
    // again, every pass.
    let blob = match tree.get_path(Path::new(OPEN_FILE)) {
        Ok(entry) => Some(repo.find_blob(entry.id()).map_err(&err)?),
        Err(_) => None,
    };
    let open =
        match &blob {
            Some(blob) => parse_lines(OPEN_FILE, &String::from_utf8_lossy(blob.content()))
                .map_err(|source| LedgerError::Unreadable {
                    ledger_ref: name.clone(),
                    commit: tip.to_string(),
                    source,
                })?,
            None => Vec::new(),
        };
    Ok(Book {
        tip: Some(tip),
        open,
    })
}

/// Every life of `cluster`'s ledger that `filter` matches, closed ones first (by month), then
/// the open ones. Month files that end before `filter.from` are not read, and lines without
/// the filter's image or node are skipped before they are parsed.
pub fn read_lives(
    repo: &Repository,
    cluster: &str,
    filter: &Filter,
) -> Result<Vec<Life>, LedgerError> {
    let name = ledger_ref(cluster);
    let Ok(tip) = repo.refname_to_id(&name) else {
        return Ok(Vec::new());
    };
    let err = LedgerError::git(&name);
    let tree = repo.find_commit(tip).and_then(|c| c.tree()).map_err(&err)?;
    let mut files: Vec<String> = Vec::new();
    if let Ok(dir) = tree.get_path(Path::new(LIVES_DIR))
        && let Ok(sub) = repo.find_tree(dir.id())
    {
        for e in sub.iter() {
            if let Ok(n) = e.name() {
                files.push(format!("{LIVES_DIR}/{n}"));
            }
        }
    }
    files.sort();
    files.retain(|f| month_in(f, filter.from));
    files.push(OPEN_FILE.to_string());
    let needle = filter.needle();
    let mut out = Vec::new();
    for f in files {
        let Some(text) = file_text(repo, &tree, &f).map_err(&err)? else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            if needle.as_ref().is_some_and(|n| !line.contains(n.as_str())) {
                continue;
            }
            let life = parse_lines(&f, line).map_err(|mut source| {
                source.line = i + 1;
                LedgerError::Unreadable {
                    ledger_ref: name.clone(),
                    commit: tip.to_string(),
                    source,
                }
            })?;
            out.extend(life.into_iter().filter(|l| filter.matches(l)));
        }
    }
    Ok(out)
}

/// Who signs an append (`rota+<cluster>@rota.dev`, at `now`: the agent's clock).
fn signature(cluster: &str, now: DateTime<Utc>) -> Result<git2::Signature<'static>, git2::Error> {
    git2::Signature::new(
        "rota",
        &format!("rota+{cluster}@rota.dev"),
        &git2::Time::new(now.timestamp(), 0),
    )
}

/// The summary line of an append's commit message.
fn subject(cluster: &str, delta: &Delta) -> String {
    format!(
        "ledger {cluster}: {} joined, {} draining, {} left",
        delta.opened.len(),
        delta.updated.len(),
        delta.closed.len()
    )
}

/// Signs an append's payload: the armored signature, or why it could not.
pub type Signer<'a> = &'a dyn Fn(&str) -> Result<String, String>;

/// Appends `delta` to `cluster`'s ledger on top of `book` (as read from its tip) and returns
/// the new tip. `sign` signs the append's payload ([`signed_payload`]) and returns an armored
/// signature, kept in the commit message. Fails (nothing written) when the ref has moved
/// since `book` was read.
///
/// `book` is given up: its lives become the new book's (moved, not copied), and they and the
/// new `open.jsonl` text are let go as soon as the text is a blob, before the tree and the
/// commit are written (and before the caller pushes).
pub fn append(
    repo: &Repository,
    cluster: &str,
    book: Book,
    delta: &Delta,
    now: DateTime<Utc>,
    sign: Option<Signer<'_>>,
) -> Result<Oid, LedgerError> {
    let name = ledger_ref(cluster);
    let err = LedgerError::git(&name);
    let parent = match book.tip {
        Some(t) => Some(repo.find_commit(t).map_err(&err)?),
        None => None,
    };
    let base = match &parent {
        Some(c) => Some(c.tree().map_err(&err)?),
        None => None,
    };
    let mut by_month: BTreeMap<String, String> = BTreeMap::new();
    for life in &delta.closed {
        let file = month_file(life.left.unwrap_or(now));
        let text = by_month.entry(file.clone()).or_insert_with(|| {
            base.as_ref()
                .and_then(|t| file_text(repo, t, &file).ok().flatten())
                .unwrap_or_default()
        });
        text.push_str(&life.to_line());
        text.push('\n');
    }
    let open_blob = {
        let lives = delta.apply_to(book.open);
        let mut open = String::with_capacity(lives.len() * 320);
        for l in &lives {
            open.push_str(&l.to_line());
            open.push('\n');
        }
        drop(lives);
        repo.blob(open.as_bytes()).map_err(&err)?
    };
    let lives_base = base
        .as_ref()
        .and_then(|t| t.get_path(Path::new(LIVES_DIR)).ok())
        .and_then(|e| repo.find_tree(e.id()).ok());
    let mut lives = repo.treebuilder(lives_base.as_ref()).map_err(&err)?;
    for (file, text) in &by_month {
        let blob = repo.blob(text.as_bytes()).map_err(&err)?;
        let leaf = file.trim_start_matches(&format!("{LIVES_DIR}/"));
        lives.insert(leaf, blob, 0o100644).map_err(&err)?;
    }
    let lives = lives.write().map_err(&err)?;
    let mut root = repo.treebuilder(base.as_ref()).map_err(&err)?;
    root.insert(OPEN_FILE, open_blob, 0o100644).map_err(&err)?;
    if !repo.find_tree(lives).map_err(&err)?.is_empty() {
        root.insert(LIVES_DIR, lives, 0o040000).map_err(&err)?;
    }
    let tree = repo.find_tree(root.write().map_err(&err)?).map_err(&err)?;
    let mut message = subject(cluster, delta) + "\n";
    if let Some(sign) = sign {
        let parent_id = book.tip.map(|t| t.to_string());
        let payload = signed_payload(cluster, parent_id.as_deref(), &tree.id().to_string());
        let armored = sign(&payload).map_err(|message| LedgerError::Sign {
            ledger_ref: name.clone(),
            message,
        })?;
        message.push('\n');
        message.push_str(armored.trim_end());
        message.push('\n');
    }
    let sig = signature(cluster, now).map_err(&err)?;
    let parents: Vec<&git2::Commit> = parent.iter().collect();
    // Moves the ref only from the tip `book` was read at (git2 checks the first parent is
    // the ref's current value): a concurrent append fails instead of forking the chain.
    repo.commit(Some(&name), &sig, &sig, &message, &tree, &parents)
        .map_err(&err)
}

/// The armored signature in an append's commit message, if any.
pub fn signature_of(message: &str) -> Option<&str> {
    let at = message.find("-----BEGIN SSH SIGNATURE-----")?;
    Some(message[at..].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn appends_chain_file_closed_lives_by_month_and_never_twice() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let pools: BTreeMap<String, PoolContext> =
            [("general".to_string(), PoolContext::default())]
                .into_iter()
                .collect();
        let step = |seen: &[Seen], at| {
            let book = read_book(&repo, "c").unwrap();
            let d = diff("c", &book.open, seen, &pools, Start::Continuing, at);
            append(&repo, "c", book, &d, at, None).unwrap()
        };
        let first = step(&[seen("a", "ami-1"), seen("b", "ami-1")], t(0));
        // `a` leaves in November, `b` in December: one file each.
        step(&[seen("b", "ami-1")], t(5));
        let last = step(&[], t(15));
        let c = repo.find_commit(last).unwrap();
        assert_eq!(c.parent_count(), 1);
        let all = read_lives(&repo, "c", &Filter::default()).unwrap();
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(all[0].node, "a");
        let tree = c.tree().unwrap();
        assert!(tree.get_path(Path::new("lives/2026-11.jsonl")).is_ok());
        assert!(tree.get_path(Path::new("lives/2026-12.jsonl")).is_ok());
        assert_eq!(read_book(&repo, "c").unwrap().open, vec![]);
        let from_dec = Filter {
            from: Some(t(11)),
            ..Filter::default()
        };
        assert_eq!(read_lives(&repo, "c", &from_dec).unwrap().len(), 1);
        // An append on a tip that has moved is refused: no fork.
        let stale = Book {
            tip: Some(first),
            open: Vec::new(),
        };
        assert!(append(&repo, "c", stale, &Delta::default(), t(20), None).is_err());
        assert_eq!(clusters(&repo).unwrap(), ["c"]);
    }
}
