//! Which refs one poll fetches, decided from the remote's ref advertisement and the refs the
//! mirror already holds. Pure: [`super::GitSource::fetch`] lists the remote once, asks this
//! module, and fetches what it names over the same connection. The protocol v2 probe
//! ([`super::ls_refs`]) asks it first with the few refs the server listed for it: an empty
//! plan there ends the poll before libgit2 connects.
//!
//! Why here and not in libgit2: libgit2 (1.9, what git2 0.21 bundles) speaks only git
//! protocol v0/v1, where the server sends every ref it has before the client can ask for
//! anything (no `ls-refs` with `ref-prefix`). The advertisement is paid once per connection
//! whatever is asked; what a poll still controls is how many connections it opens (one) and
//! what it then asks the server to send: nothing when nothing it needs moved, else only the
//! refs it needs that moved (docs/gitops.md, "What a poll costs").

use std::collections::{BTreeMap, BTreeSet};

use git2::Oid;

use super::refs::{NOTES_PREFIX, REMOTE_NOTES_PREFIX, REMOTE_STOP_REF};
use rota_core::fleet::stops::STOP_REF;

/// Whose notes refs a fetch brings in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotesScope {
    /// The fleet is not known yet (the first fetch of `rota ui` or `rota propose`): the
    /// first `cap` notes refs by name, so that a flood pushed by anyone is not mirrored whole.
    FirstByName { cap: usize },
    /// These clusters' refs only, however many: the fleet's declared clusters (views), or
    /// what an agent's decision needs (its own, and the clusters its guard waits on). Refs
    /// no cluster of the set owns are never fetched (the flood defence).
    Clusters(BTreeSet<String>),
}

/// What one poll asks the server for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchPlan {
    /// Refspecs to fetch, each naming one ref (empty: nothing the poll needs moved, and no
    /// fetch is made at all).
    pub specs: Vec<String>,
    /// Notes refs in scope that the remote advertises (moved or not).
    pub notes_in_scope: usize,
    /// Notes refs the remote advertises that the scope leaves out (never fetched).
    pub notes_left_out: usize,
}

/// The refspecs one poll fetches: the followed branch if it moved (or is not mirrored yet)
/// and `with_branch` holds, and each notes ref in `scope` whose advertised id differs from
/// the mirror's copy. `advertised` is the remote's list (`refs/...` name, id); `local` maps
/// the mirror's ref names (`refs/remotes/origin/<branch>`, `refs/rota/remote-notes/<c>`) to
/// their ids. A ref the remote no longer advertises is not fetched (nor deleted here).
pub fn plan(
    branch: &str,
    with_branch: bool,
    advertised: &[(String, Oid)],
    local: &BTreeMap<String, Oid>,
    scope: &NotesScope,
) -> FetchPlan {
    let mut out = FetchPlan::default();
    let branch_ref = format!("refs/heads/{branch}");
    let tracking = super::refs::tracking_ref(branch);
    if with_branch
        && let Some((_, oid)) = advertised.iter().find(|(n, _)| *n == branch_ref)
        && local.get(&tracking) != Some(oid)
    {
        out.specs.push(format!("+{branch_ref}:{tracking}"));
    }
    // The fleet stop's ref (`rota stop`) with the branch, on every poll, when it moved. A
    // ref the remote stopped advertising keeps the mirror's copy: deleting it lifts nothing
    // (and a stop in force is carried by the pools' specs whatever the ref says).
    if with_branch
        && let Some((_, oid)) = advertised.iter().find(|(n, _)| n == STOP_REF)
        && local.get(REMOTE_STOP_REF) != Some(oid)
    {
        out.specs.push(format!("+{STOP_REF}:{REMOTE_STOP_REF}"));
    }
    let mut notes: Vec<(&str, &Oid)> = advertised
        .iter()
        .filter_map(|(n, oid)| {
            let cluster = n.strip_prefix(NOTES_PREFIX)?;
            (!cluster.is_empty()).then_some((cluster, oid))
        })
        .collect();
    notes.sort_by_key(|(c, _)| *c);
    notes.dedup_by_key(|(c, _)| *c);
    let total = notes.len();
    let kept: Vec<(&str, &Oid)> = match scope {
        NotesScope::FirstByName { cap } => notes.into_iter().take(*cap).collect(),
        NotesScope::Clusters(set) => notes
            .into_iter()
            .filter(|(c, _)| set.contains(*c))
            .collect(),
    };
    out.notes_in_scope = kept.len();
    out.notes_left_out = total - kept.len();
    for (cluster, oid) in kept {
        let mirrored = format!("{REMOTE_NOTES_PREFIX}{cluster}");
        if local.get(&mirrored) != Some(oid) {
            out.specs
                .push(format!("+{NOTES_PREFIX}{cluster}:{mirrored}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_ref_is_fetched_with_the_branch_when_it_moved() {
        let scope = NotesScope::Clusters(BTreeSet::new());
        let advertised = adv(&[("refs/heads/main", 1), ("refs/rota/stop", 7)]);
        let local: BTreeMap<String, Oid> =
            [("refs/remotes/origin/main".to_string(), oid(1))].into();
        let p = plan("main", true, &advertised, &local, &scope);
        assert_eq!(
            p.specs,
            vec!["+refs/rota/stop:refs/rota/remote-stop".to_string()]
        );
        let mut local = local;
        local.insert("refs/rota/remote-stop".into(), oid(7));
        assert!(
            plan("main", true, &advertised, &local, &scope)
                .specs
                .is_empty()
        );
        // A notes-only fetch leaves it for the next poll.
        local.remove("refs/rota/remote-stop");
        assert!(
            plan("main", false, &advertised, &local, &scope)
                .specs
                .is_empty()
        );
    }

    fn oid(n: u8) -> Oid {
        Oid::from_bytes(&[n; 20]).unwrap()
    }

    fn adv(refs: &[(&str, u8)]) -> Vec<(String, Oid)> {
        refs.iter().map(|(n, i)| (n.to_string(), oid(*i))).collect()
    }

    fn clusters(names: &[&str]) -> NotesScope {
        NotesScope::Clusters(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn nothing_moved_means_no_fetch() {
        let advertised = adv(&[
            ("refs/heads/main", 1),
            ("refs/notes/rota/a", 2),
            ("refs/notes/rota/b", 3),
        ]);
        let local: BTreeMap<String, Oid> = [
            ("refs/remotes/origin/main", 1),
            ("refs/rota/remote-notes/a", 2),
        ]
        .iter()
        .map(|(n, i)| (n.to_string(), oid(*i)))
        .collect();
        let p = plan("main", true, &advertised, &local, &clusters(&["a"]));
        assert!(p.specs.is_empty(), "{p:?}");
        assert_eq!((p.notes_in_scope, p.notes_left_out), (1, 1));
    }

    #[test]
    fn only_moved_refs_in_scope_are_fetched() {
        let advertised = adv(&[
            ("refs/heads/main", 9),
            ("refs/heads/other", 9),
            ("refs/notes/rota/a", 2),
            ("refs/notes/rota/b", 4),
            ("refs/notes/rota/c", 5),
            ("refs/notes/rota/", 5),
            ("refs/notes/other", 5),
        ]);
        let local: BTreeMap<String, Oid> = [
            ("refs/remotes/origin/main", 1),
            ("refs/rota/remote-notes/a", 2),
            ("refs/rota/remote-notes/b", 3),
        ]
        .iter()
        .map(|(n, i)| (n.to_string(), oid(*i)))
        .collect();
        let p = plan(
            "main",
            true,
            &advertised,
            &local,
            &clusters(&["a", "b", "z"]),
        );
        assert_eq!(
            p.specs,
            vec![
                "+refs/heads/main:refs/remotes/origin/main".to_string(),
                "+refs/notes/rota/b:refs/rota/remote-notes/b".to_string(),
            ]
        );
        // c is advertised but out of scope; z is in scope but not on the remote.
        assert_eq!((p.notes_in_scope, p.notes_left_out), (2, 1));
        let notes_only = plan("main", false, &advertised, &local, &clusters(&["a", "b"]));
        assert_eq!(
            notes_only.specs,
            vec!["+refs/notes/rota/b:refs/rota/remote-notes/b".to_string()]
        );
    }

    #[test]
    fn before_the_fleet_is_known_the_first_refs_by_name_up_to_the_cap() {
        let advertised = adv(&[
            ("refs/heads/main", 1),
            ("refs/notes/rota/c", 2),
            ("refs/notes/rota/a", 2),
            ("refs/notes/rota/b", 2),
        ]);
        let p = plan(
            "main",
            true,
            &advertised,
            &BTreeMap::new(),
            &NotesScope::FirstByName { cap: 2 },
        );
        assert_eq!(
            p.specs,
            vec![
                "+refs/heads/main:refs/remotes/origin/main".to_string(),
                "+refs/notes/rota/a:refs/rota/remote-notes/a".to_string(),
                "+refs/notes/rota/b:refs/rota/remote-notes/b".to_string(),
            ]
        );
        assert_eq!(p.notes_left_out, 1);
    }

    #[test]
    fn a_branch_the_remote_does_not_have_is_not_asked_for() {
        let advertised = adv(&[("refs/heads/other", 1)]);
        let p = plan("main", true, &advertised, &BTreeMap::new(), &clusters(&[]));
        assert!(p.specs.is_empty());
    }
}
