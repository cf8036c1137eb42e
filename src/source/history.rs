//! History moves forward only: the agent acts on a new head of the followed branch only when
//! it descends from the commit in force. `git revert` makes a new commit, so rolling back by
//! revert still works; a force-push of an older commit (however well signed) or of another
//! branch does not, until a human with access to the cluster confirms that exact rewrite.
//!
//! The confirmation names both ends, `<in force>..<new head>` in full: it is an agent flag
//! (`--confirm-rewrite`, env `ROTA_CONFIRM_REWRITE`), so setting it takes the right to change
//! the agent's Deployment, which push access to the fleet repo does not give. Naming the
//! commit it moves from makes a confirmation that was left in place harmless: once the new
//! head is in force and history moves on, the pair never matches again, so a later
//! force-push back to the same commit needs a new confirmation.
//!
//! [`judge`] is pure (ancestry comes in as a function); [`descends`] asks git.

use git2::{Oid, Repository};

/// A human's confirmation of one rewrite: from the commit in force to this exact new head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfirmedRewrite {
    pub from: Oid,
    pub to: Oid,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HistoryError {
    #[error(
        "--confirm-rewrite {0:?}: expected <commit in force>..<new head>, two full 40-hex commit ids"
    )]
    Confirmation(String),
}

impl std::str::FromStr for ConfirmedRewrite {
    type Err = HistoryError;

    /// `<40 hex>..<40 hex>`. Full ids only: an abbreviated one could be matched by a commit
    /// an attacker crafted to share its prefix.
    fn from_str(s: &str) -> Result<Self, HistoryError> {
        let bad = || HistoryError::Confirmation(s.to_string());
        let (from, to) = s.trim().split_once("..").ok_or_else(bad)?;
        let full = |x: &str| {
            (x.len() == 40 && x.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| Oid::from_str(x).ok())
                .flatten()
        };
        Ok(ConfirmedRewrite {
            from: full(from).ok_or_else(bad)?,
            to: full(to).ok_or_else(bad)?,
        })
    }
}

/// How a new head relates to the commit(s) in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lineage {
    /// Nothing in force yet, or the head descends from (or is) every commit in force.
    Forward,
    /// Not a descendant, but a human confirmed exactly this rewrite.
    Confirmed { from: Oid },
    /// Not a descendant (or not shown to be one): act on nothing of it.
    Rewrite { in_force: Oid, head: Oid },
}

/// Judges `head` against `in_force` (the commit in force; after a restart, every commit the
/// cluster's NodePoolRotations were last given). `descends(a, b)`: `a` is `b` or has it
/// among its ancestors; `false` when that cannot be shown (a shallow mirror, a commit the
/// mirror does not have): failing closed.
pub fn judge(
    head: Oid,
    in_force: &[Oid],
    confirmed: Option<ConfirmedRewrite>,
    descends: impl Fn(Oid, Oid) -> bool,
) -> Lineage {
    let Some(&behind) = in_force.iter().find(|&&f| !descends(head, f)) else {
        return Lineage::Forward;
    };
    match confirmed {
        Some(c) if c.to == head && in_force.contains(&c.from) => {
            Lineage::Confirmed { from: c.from }
        }
        _ => Lineage::Rewrite {
            in_force: behind,
            head,
        },
    }
}

/// `head` is `ancestor` or descends from it, in `repo`. Unknown commits and errors (a
/// shallow history that ends before `ancestor`) answer `false`.
pub fn descends(repo: &Repository, head: Oid, ancestor: Oid) -> bool {
    head == ancestor || repo.graph_descendant_of(head, ancestor).unwrap_or(false)
}

/// The `error` status description of a refused rewrite (short ids; the log and the metric
/// carry the full ones the confirmation needs).
pub fn rewrite_description(in_force: Oid, head: Oid) -> String {
    let s = |o: Oid| o.to_string()[..12].to_string();
    format!(
        "commit {} does not descend from {} in force (force-push?): not acted on until confirmed (--confirm-rewrite)",
        s(head),
        s(in_force)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid(n: u8) -> Oid {
        Oid::from_bytes(&[n; 20]).unwrap()
    }

    /// 1 <- 2 <- 3 (main); 1 <- 9 (another branch).
    fn descends_in_graph(a: Oid, b: Oid) -> bool {
        let parents = |x: Oid| -> Vec<Oid> {
            match x.as_bytes()[0] {
                2 => vec![oid(1)],
                3 => vec![oid(2)],
                9 => vec![oid(1)],
                _ => vec![],
            }
        };
        let mut stack = vec![a];
        while let Some(x) = stack.pop() {
            if x == b {
                return true;
            }
            stack.extend(parents(x));
        }
        false
    }

    #[test]
    fn forward_rewrite_and_confirmation() {
        assert_eq!(
            judge(oid(3), &[], None, descends_in_graph),
            Lineage::Forward
        );
        assert_eq!(
            judge(oid(3), &[oid(2)], None, descends_in_graph),
            Lineage::Forward
        );
        assert_eq!(
            judge(oid(2), &[oid(2)], None, descends_in_graph),
            Lineage::Forward
        );
        // Back to an older commit, or to another branch.
        let back = judge(oid(1), &[oid(3)], None, descends_in_graph);
        assert_eq!(
            back,
            Lineage::Rewrite {
                in_force: oid(3),
                head: oid(1)
            }
        );
        assert!(matches!(
            judge(oid(9), &[oid(3)], None, descends_in_graph),
            Lineage::Rewrite { .. }
        ));
        // Confirmed: exactly this pair.
        let ok = ConfirmedRewrite {
            from: oid(3),
            to: oid(1),
        };
        assert_eq!(
            judge(oid(1), &[oid(3)], Some(ok), descends_in_graph),
            Lineage::Confirmed { from: oid(3) }
        );
        // A confirmation left in place does not allow another rewrite to the same commit
        // once history moved on (in force is now 2, not 3).
        assert!(matches!(
            judge(oid(1), &[oid(2)], Some(ok), descends_in_graph),
            Lineage::Rewrite { .. }
        ));
        // Nor a rewrite to another commit.
        assert!(matches!(
            judge(oid(9), &[oid(3)], Some(ok), descends_in_graph),
            Lineage::Rewrite { .. }
        ));
        // After a restart several commits may be in force: the head must descend from all.
        assert!(matches!(
            judge(oid(3), &[oid(2), oid(9)], None, descends_in_graph),
            Lineage::Rewrite { in_force, .. } if in_force == oid(9)
        ));
    }

    #[test]
    fn confirmations_take_full_ids_only() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let c: ConfirmedRewrite = format!("{a}..{b}").parse().unwrap();
        assert_eq!(c.to, Oid::from_str(&b).unwrap());
        for bad in [
            format!("{}..{b}", &a[..12]),
            format!("{a}{b}"),
            format!("{a}..{}", "z".repeat(40)),
            String::new(),
        ] {
            assert!(bad.parse::<ConfirmedRewrite>().is_err(), "{bad}");
        }
    }
}
