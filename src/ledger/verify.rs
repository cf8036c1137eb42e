//! `rota audit --verify`: whether a cluster's ledger is what its agent appended, and nothing
//! else. Walks the chain from the tip to the first append and names every fault it finds:
//!
//! - an append with more than one parent (the chain forked and was merged);
//! - a file that does not read (file, line and field), a life of another cluster, a life
//!   filed in a month it did not leave in, a file that is not the ledger's;
//! - a month file whose earlier text is not kept whole at the start of the next version
//!   (a rewritten past: only appending is allowed);
//! - a life written twice (in two month files, or closed and still open);
//! - with agents' signers set: an append without a signature, or whose signature is not the
//!   cluster's key over its cluster, parent and tree ([`super::signed_payload`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use git2::{Oid, Repository, Tree};

use super::book::signature_of;
use super::error::LedgerError;
use super::refs::{ledger_ref, signed_payload};
use crate::report::evidence::{RecordVerifier, SignedRecords};
use rota_core::ledger::{LIVES_DIR, Life, OPEN_FILE, month_file, parse_lines};

/// What `--verify` found for one cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    pub cluster: String,
    /// Appends walked.
    pub appends: usize,
    /// Appends whose signature verified.
    pub signed: usize,
    /// Lives in the ledger (closed and open).
    pub lives: usize,
    /// What does not hold, each naming the append (short ID) and where.
    pub faults: Vec<String>,
}

/// The ledger's files in `tree`: path -> blob.
fn files(repo: &Repository, tree: &Tree) -> BTreeMap<String, Oid> {
    let mut out = BTreeMap::new();
    for e in tree.iter() {
        let name = e.name().unwrap_or("?").to_string();
        if name == LIVES_DIR
            && let Ok(sub) = repo.find_tree(e.id())
        {
            for f in sub.iter() {
                out.insert(format!("{LIVES_DIR}/{}", f.name().unwrap_or("?")), f.id());
            }
        } else {
            out.insert(name, e.id());
        }
    }
    out
}

fn text(repo: &Repository, id: Oid) -> String {
    repo.find_blob(id)
        .map(|b| String::from_utf8_lossy(b.content()).into_owned())
        .unwrap_or_default()
}

/// Checks the lives of one file of one append.
fn check_file(
    cluster: &str,
    short: &str,
    path: &str,
    text: &str,
    faults: &mut Vec<String>,
) -> Vec<Life> {
    let lives = match parse_lines(path, text) {
        Ok(l) => l,
        Err(e) => {
            faults.push(format!("append {short}: {e}"));
            return Vec::new();
        }
    };
    for (i, l) in lives.iter().enumerate() {
        let at = format!("append {short}: {path}:{}", i + 1);
        if l.cluster != cluster {
            faults.push(format!(
                "{at}: a life of cluster {} in {cluster}'s ledger",
                l.cluster
            ));
        }
        if path != OPEN_FILE {
            match l.left {
                Some(left) if month_file(left) == path => {}
                Some(left) => faults.push(format!("{at}: left {left}, filed in {path}")),
                None => faults.push(format!("{at}: an open life in a month file")),
            }
        }
    }
    lives
}

/// Walks `cluster`'s ledger in `repo` and returns what holds and what does not. `signers`:
/// the agents' allowed-signers verifier (every append must then be signed by the cluster).
pub fn verify_chain(
    repo: &Repository,
    cluster: &str,
    signers: Option<&RecordVerifier>,
) -> Result<Verdict, LedgerError> {
    let name = ledger_ref(cluster);
    let err = LedgerError::git(&name);
    let mut v = Verdict {
        cluster: cluster.to_string(),
        ..Verdict::default()
    };
    let tip = repo.refname_to_id(&name).map_err(&err)?;
    let mut at = Some(repo.find_commit(tip).map_err(&err)?);
    let mut first = true;
    while let Some(c) = at {
        v.appends += 1;
        let short = c.id().to_string()[..12].to_string();
        if c.parent_count() > 1 {
            v.faults.push(format!(
                "append {short}: {} parents (the chain was merged)",
                c.parent_count()
            ));
        }
        let parent = c.parent(0).ok();
        let tree = c.tree().map_err(&err)?;
        let now = files(repo, &tree);
        let before = match &parent {
            Some(p) => files(repo, &p.tree().map_err(&err)?),
            None => BTreeMap::new(),
        };
        let mut keys: BTreeMap<(String, String), String> = BTreeMap::new();
        for (path, id) in &now {
            let is_month = path.starts_with(&format!("{LIVES_DIR}/")) && path.ends_with(".jsonl");
            if path != OPEN_FILE && !is_month {
                v.faults
                    .push(format!("append {short}: {path} is not a ledger file"));
                continue;
            }
            // Only what changed is read again (the tip reads everything, for duplicates).
            if !first && before.get(path) == Some(id) {
                continue;
            }
            let body = text(repo, *id);
            if let Some(old) = before.get(path).filter(|_| is_month)
                && !body.starts_with(&text(repo, *old))
            {
                v.faults.push(format!(
                    "append {short}: {path} was rewritten, not appended to"
                ));
            }
            for l in check_file(cluster, &short, path, &body, &mut v.faults) {
                if first {
                    v.lives += 1;
                    if let Some(other) = keys.insert(l.key(), path.clone()) {
                        v.faults.push(format!(
                            "append {short}: node {} instance {} has two lives ({other} and {path})",
                            l.node, l.instance
                        ));
                    }
                }
            }
        }
        for path in before.keys().filter(|p| p.as_str() != OPEN_FILE) {
            if !now.contains_key(path) {
                v.faults.push(format!("append {short}: {path} was removed"));
            }
        }
        if let Some(verifier) = signers {
            check_signature(verifier, cluster, &c, parent.as_ref(), &short, &mut v)?;
        }
        first = false;
        at = parent;
    }
    Ok(v)
}

fn check_signature(
    verifier: &RecordVerifier,
    cluster: &str,
    c: &git2::Commit,
    parent: Option<&git2::Commit>,
    short: &str,
    v: &mut Verdict,
) -> Result<(), LedgerError> {
    let message = c.message().unwrap_or("");
    let Some(signature) = signature_of(message) else {
        v.faults.push(format!("append {short}: not signed"));
        return Ok(());
    };
    let parent_id = parent.map(|p| p.id().to_string());
    let signed = SignedRecords {
        payload: signed_payload(cluster, parent_id.as_deref(), &c.tree_id().to_string()),
        signature: signature.to_string() + "\n",
    };
    match verifier.verify(cluster, &signed) {
        Ok(Ok(())) => v.signed += 1,
        Ok(Err(why)) => v.faults.push(format!(
            "append {short}: the signature is not {cluster}'s: {why}"
        )),
        Err(e) => {
            return Err(LedgerError::Git {
                ledger_ref: ledger_ref(cluster),
                message: e.to_string(),
            });
        }
    }
    Ok(())
}

/// The clusters of `repo` whose ledgers exist, each verified.
pub fn verify_all(
    repo: &Repository,
    only: Option<&str>,
    signers: Option<&RecordVerifier>,
) -> Result<Vec<Verdict>, LedgerError> {
    let mut out = Vec::new();
    let names: BTreeSet<String> = super::book::clusters(repo)?.into_iter().collect();
    for c in names
        .iter()
        .filter(|c| only.is_none_or(|o| o == c.as_str()))
    {
        out.push(verify_chain(repo, c, signers)?);
    }
    Ok(out)
}

/// Whether `path` exists in the tip of `cluster`'s ledger (for tests).
pub fn has_file(repo: &Repository, cluster: &str, path: &str) -> bool {
    repo.refname_to_id(&ledger_ref(cluster))
        .and_then(|t| repo.find_commit(t))
        .and_then(|c| c.tree())
        .is_ok_and(|t| t.get_path(Path::new(path)).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::book::{append, read_book};
    use chrono::{DateTime, Utc};
    use rota_core::ledger::{PoolContext, Seen, Start, diff};

    fn t(min: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-20T08:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
            + chrono::Duration::minutes(min)
    }

    fn seen(node: &str) -> Seen {
        Seen {
            pool: "general".into(),
            node: node.into(),
            instance: format!("i-{node}"),
            image: Some("ami-1".into()),
            ready: true,
            cordoned: None,
        }
    }

    fn ledger(repo: &Repository) {
        let pools: BTreeMap<String, PoolContext> =
            [("general".to_string(), PoolContext::default())]
                .into_iter()
                .collect();
        for (i, seen) in [vec![seen("a"), seen("b")], vec![seen("b")], vec![]]
            .iter()
            .enumerate()
        {
            let book = read_book(repo, "c").unwrap();
            let d = diff(
                "c",
                &book.open,
                seen,
                &pools,
                Start::Continuing,
                t(i as i64),
            );
            append(repo, "c", book, &d, t(i as i64), None).unwrap();
        }
    }

    #[test]
    fn a_ledger_as_appended_holds_and_a_rewritten_month_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        ledger(&repo);
        let v = verify_chain(&repo, "c", None).unwrap();
        assert_eq!((v.appends, v.lives), (3, 2));
        assert!(v.faults.is_empty(), "{:?}", v.faults);

        // Someone edits the month file in a new commit on top (a forged history).
        let tip = repo
            .find_commit(repo.refname_to_id("refs/rota/ledger/c").unwrap())
            .unwrap();
        let tree = tip.tree().unwrap();
        let lives = repo
            .find_tree(tree.get_path(Path::new("lives")).unwrap().id())
            .unwrap();
        let mut lb = repo.treebuilder(Some(&lives)).unwrap();
        let first = text(&repo, lives.get_name("2026-11.jsonl").unwrap().id());
        let edited = first.replacen("\"node\":\"a\"", "\"node\":\"z\"", 1);
        lb.insert(
            "2026-11.jsonl",
            repo.blob(edited.as_bytes()).unwrap(),
            0o100644,
        )
        .unwrap();
        let mut rb = repo.treebuilder(Some(&tree)).unwrap();
        rb.insert("lives", lb.write().unwrap(), 0o040000).unwrap();
        let new = repo.find_tree(rb.write().unwrap()).unwrap();
        let sig = git2::Signature::now("x", "x@example.com").unwrap();
        repo.commit(
            Some("refs/rota/ledger/c"),
            &sig,
            &sig,
            "edit",
            &new,
            &[&tip],
        )
        .unwrap();
        let v = verify_chain(&repo, "c", None).unwrap();
        assert_eq!(v.faults.len(), 1, "{:?}", v.faults);
        assert!(
            v.faults[0].contains("lives/2026-11.jsonl was rewritten"),
            "{:?}",
            v.faults
        );
    }

    fn keygen(dir: &Path, name: &str) -> (std::path::PathBuf, String) {
        let key = dir.join(name);
        let ok = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(&key)
            .status()
            .expect("ssh-keygen is installed (openssh-client)");
        assert!(ok.success());
        let public = std::fs::read_to_string(key.with_extension("pub")).unwrap();
        (key, public.trim().to_string())
    }

    #[test]
    fn signed_appends_verify_and_one_signed_by_another_key_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path().join("r")).unwrap();
        let (ours, public) = keygen(dir.path(), "ours");
        let (theirs, _) = keygen(dir.path(), "theirs");
        let signers = dir.path().join("allowed_signers");
        std::fs::write(
            &signers,
            format!("c namespaces=\"rota-records\" {public}\n"),
        )
        .unwrap();
        let pools: BTreeMap<String, PoolContext> =
            [("general".to_string(), PoolContext::default())]
                .into_iter()
                .collect();
        let append_signed = |key: &Path, seen: &[Seen], at| {
            let sign = |payload: &str| {
                crate::report::evidence::sign(key, payload)
                    .map(|s| s.signature)
                    .map_err(|e| e.to_string())
            };
            let book = read_book(&repo, "c").unwrap();
            let d = diff("c", &book.open, seen, &pools, Start::Continuing, at);
            append(&repo, "c", book, &d, at, Some(&sign)).unwrap()
        };
        append_signed(&ours, &[seen("a")], t(0));
        append_signed(&ours, &[], t(1));
        let verifier = RecordVerifier::new(&signers);
        let v = verify_chain(&repo, "c", Some(&verifier)).unwrap();
        assert_eq!((v.appends, v.signed), (2, 2));
        assert!(v.faults.is_empty(), "{:?}", v.faults);

        let forged = append_signed(&theirs, &[seen("b")], t(2));
        let v = verify_chain(&repo, "c", Some(&verifier)).unwrap();
        assert_eq!(v.signed, 2);
        assert_eq!(v.faults.len(), 1, "{:?}", v.faults);
        let short = &forged.to_string()[..12];
        assert!(
            v.faults[0].starts_with(&format!("append {short}: the signature is not c's")),
            "{:?}",
            v.faults
        );
        // Unsigned: named as such.
        let book = read_book(&repo, "c").unwrap();
        let d = diff("c", &book.open, &[], &pools, Start::Continuing, t(3));
        append(&repo, "c", book, &d, t(3), None).unwrap();
        let v = verify_chain(&repo, "c", Some(&verifier)).unwrap();
        assert!(
            v.faults.iter().any(|f| f.ends_with(": not signed")),
            "{:?}",
            v.faults
        );
    }
}
