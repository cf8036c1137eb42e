//! The one reader of rota's git notes, shared by the agent and every view (`rota status`,
//! `rota where`, `rota promote`, `rota ui`): what anyone with push access writes under
//! `refs/notes/rota/*` reaches a reader only through here, bounded and validated.
//!
//! - **Size before content.** A note is found in its notes tree by name (notes trees fan out
//!   by the first hex pairs of the annotated commit: `ab/cdef...`) and its blob's size is read
//!   from the object header; a note over [`MAX_NOTE_BYTES`] is never inflated. (A 200 MiB
//!   note packs to under 1 MiB and cost every reader ~430 MiB before.)
//! - **A rota document for that cluster.** JSON of the [`NoteDoc`] shape, naming the cluster
//!   whose ref holds it.
//! - **Dates in range.** Every timestamp lies in [`EARLIEST`]..=[`LATEST`] (RFC 3339's
//!   four-digit years): a record dated at the end of chrono's range made the views' soak
//!   arithmetic overflow and panic.
//! - **Text made safe.** Every string is passed through [`rota_core::sanitize::line`]: a
//!   description cannot carry terminal escapes into an operator's terminal or a log.
//! - **Only the cluster's own.** Statuses whose context is not the cluster's
//!   (`rota/<cluster>`, `rota/<cluster>/<pool>`) and records about another cluster are
//!   dropped (the store's policy does the latter, signatures included).
//!
//! A note that fails any check holds nothing; the caller leaves it out, named in a warning.
//! Which clusters are read is always the caller's list (the fleet's declared clusters), each
//! from its own ref by name: nothing here globs over what pushers added.

use chrono::{DateTime, Utc};
use git2::{ObjectType, Oid, Repository};

use super::note_doc::NoteDoc;
use rota_core::waves::PoolRecord;

/// Largest note read. A cluster's note holds one status per pool and up to 32 completions
/// and 32 gate failures per pool, twice when signed: about 16 KiB per pool at full history,
/// so this fits a cluster of 120 pools; the writer refuses to write a larger one.
pub const MAX_NOTE_BYTES: u64 = 2 * 1024 * 1024;
/// Most bytes of notes read for one commit, over every cluster: past it the remaining
/// clusters' notes are left out (named in a warning). 2048 clusters of 32 KiB fit.
pub const MAX_NOTES_BYTES_PER_COMMIT: u64 = 64 * 1024 * 1024;

/// The earliest timestamp a note may carry.
pub const EARLIEST: &str = "2000-01-01T00:00:00Z";
/// The latest timestamp a note may carry (the end of RFC 3339's four-digit years).
pub const LATEST: &str = "9999-12-31T23:59:59Z";

fn bound(s: &str) -> DateTime<Utc> {
    s.parse().expect("a valid constant")
}

/// Why a note was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreadable {
    /// The note's blob is larger than [`MAX_NOTE_BYTES`] (not read).
    TooLarge { bytes: u64 },
    /// The tree entry for the commit is not a plain file.
    NotAFile,
    /// Not a rota note document, or one naming another cluster, or out of bounds.
    Invalid(String),
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::TooLarge { bytes } => write!(
                f,
                "the note is {bytes} bytes, over the limit of {MAX_NOTE_BYTES}: not read"
            ),
            Unreadable::NotAFile => f.write_str("the note's tree entry is not a file"),
            Unreadable::Invalid(why) => f.write_str(why),
        }
    }
}

/// A note's blob and its size, or why it is not read.
pub type Found = Result<(Oid, u64), Unreadable>;

/// The note blob on `commit` in the notes whose tip (the notes ref's commit, as looked up
/// once by the caller) is `tip`, and its size, found without reading any blob. `Ok(None)`: no
/// note on that commit.
pub fn find_at(repo: &Repository, tip: Oid, commit: Oid) -> Result<Option<Found>, git2::Error> {
    let tree = repo.find_object(tip, None)?.peel_to_tree()?;
    let hex = commit.to_string();
    let mut tree = tree;
    let mut rest = hex.as_str();
    loop {
        // The whole remaining name: the note itself.
        if let Some(e) = tree.get_name(rest) {
            return match (e.kind(), e.filemode()) {
                (Some(ObjectType::Blob), 0o100644 | 0o100755) => {
                    let (size, _) = repo.odb()?.read_header(e.id())?;
                    let size = size as u64;
                    if size > MAX_NOTE_BYTES {
                        Ok(Some(Err(Unreadable::TooLarge { bytes: size })))
                    } else {
                        Ok(Some(Ok((e.id(), size))))
                    }
                }
                _ => Ok(Some(Err(Unreadable::NotAFile))),
            };
        }
        // A fan-out folder named by the next two hex digits.
        if rest.len() <= 2 {
            return Ok(None);
        }
        let next = match tree.get_name(&rest[..2]) {
            Some(e) if e.kind() == Some(ObjectType::Tree) => e.id(),
            _ => return Ok(None),
        };
        tree = repo.find_tree(next)?;
        rest = &rest[2..];
    }
}

fn check_date(at: &DateTime<Utc>, field: &str) -> Result<(), String> {
    if *at < bound(EARLIEST) || *at > bound(LATEST) {
        return Err(format!(
            "{field} {} is outside {EARLIEST}..{LATEST}",
            at.to_rfc3339()
        ));
    }
    Ok(())
}

/// Checks the dates of `records` and makes their text safe (in place).
pub fn vet_records(records: &mut [PoolRecord]) -> Result<(), String> {
    use rota_core::sanitize::line_in_place as clean;
    for r in records.iter_mut() {
        clean(&mut r.cluster);
        clean(&mut r.pool);
        for c in &mut r.completions {
            check_date(
                &c.completed_at,
                &format!("pools[{}/{}].completions[].completedAt", r.cluster, r.pool),
            )?;
            clean(&mut c.channel);
            clean(&mut c.version);
        }
        for g in &mut r.gate_failures {
            check_date(
                &g.at,
                &format!("pools[{}/{}].gateFailures[].at", r.cluster, r.pool),
            )?;
            clean(&mut g.channel);
            clean(&mut g.version);
            clean(&mut g.gate);
        }
    }
    Ok(())
}

/// Parses a note's bytes as `cluster`'s document and validates it: the cluster it names, its
/// dates, its text; statuses of other contexts are dropped. Records are vetted too, but which
/// of them count (about this cluster, signed) is the store's policy.
pub fn parse(bytes: &[u8], cluster: &str) -> Result<NoteDoc, Unreadable> {
    let mut doc: NoteDoc = serde_json::from_slice(bytes).map_err(|e| {
        Unreadable::Invalid(format!(
            "not a rota status document: {}",
            rota_core::sanitize::line(&e.to_string())
        ))
    })?;
    if doc.cluster != cluster {
        return Err(Unreadable::Invalid(format!(
            "the note names cluster {:?}, not {cluster}",
            rota_core::sanitize::line(&doc.cluster)
        )));
    }
    let own = super::status::cluster_context(cluster);
    let own_pools = format!("{own}/");
    doc.statuses
        .retain(|s| s.context == own || s.context.starts_with(&own_pools));
    for s in &mut doc.statuses {
        check_date(&s.updated_at, &format!("statuses[{}].updatedAt", s.context))
            .map_err(Unreadable::Invalid)?;
        rota_core::sanitize::line_in_place(&mut s.context);
        rota_core::sanitize::line_in_place(&mut s.description);
        if let Some(u) = &mut s.target_url {
            rota_core::sanitize::line_in_place(u);
        }
        // A stop note is shown as is by the views: made safe, and bounded (a hostile
        // pusher's note must not fill the page).
        if let Some(stop) = &mut s.stop {
            *stop = stop.sanitized();
            stop.blocked_by.truncate(MAX_BLOCKERS);
            for t in [&mut stop.cause, &mut stop.next, &mut stop.reason]
                .into_iter()
                .chain(stop.blocked_by.iter_mut())
            {
                if t.chars().count() > MAX_NOTE_TEXT {
                    *t = t.chars().take(MAX_NOTE_TEXT).collect::<String>() + "…";
                }
            }
        }
    }
    vet_records(&mut doc.pools).map_err(Unreadable::Invalid)?;
    Ok(doc)
}

/// What of a stop note the views show: at most this many blockers, each text at most this
/// many characters.
const MAX_BLOCKERS: usize = 20;
const MAX_NOTE_TEXT: usize = 500;

#[cfg(test)]
mod tests {
    use super::*;

    fn note(cluster: &str, completed_at: &str, description: &str) -> Vec<u8> {
        serde_json::json!({
            "cluster": cluster,
            "statuses": [
                {"context": format!("rota/{cluster}/general"), "state": "pending",
                 "description": description, "updatedAt": "2026-11-22T03:00:00Z"},
                {"context": "rota/someone-else", "state": "success",
                 "description": "all done", "updatedAt": "2026-11-22T03:00:00Z"}
            ],
            "pools": [{"cluster": cluster, "pool": "general", "completions": [
                {"channel": "general", "version": "2026.11.2", "completedAt": completed_at}]}]
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn a_valid_note_keeps_only_its_own_statuses_with_safe_text() {
        let doc = parse(
            &note(
                "c1",
                "2026-11-22T02:40:00Z",
                "3/4 nodes\x1b]52;c;cHduZWQ=\x07",
            ),
            "c1",
        )
        .unwrap();
        assert_eq!(doc.statuses.len(), 1, "rota/someone-else is dropped");
        assert_eq!(
            doc.statuses[0].description,
            "3/4 nodes\\u{1b}]52;c;cHduZWQ=\\u{7}"
        );
    }

    #[test]
    fn dates_at_the_ends_of_the_range_and_other_clusters_are_refused() {
        for at in ["+262142-12-31T23:59:59Z", "1970-01-01T00:00:00Z"] {
            let Ok(bytes) = std::panic::catch_unwind(|| note("c1", at, "x")) else {
                continue;
            };
            match parse(&bytes, "c1") {
                Err(Unreadable::Invalid(why)) => {
                    assert!(why.contains("completedAt"), "{why}")
                }
                // chrono may refuse the extended year itself: refused either way.
                other => assert!(
                    other.is_err(),
                    "a completion at {at} must be refused: {other:?}"
                ),
            }
        }
        let e = parse(&note("c1", "2026-11-22T02:40:00Z", "x"), "c2").unwrap_err();
        assert!(e.to_string().contains("names cluster"), "{e}");
        assert!(parse(b"\x00\x01", "c1").is_err());
    }
}
