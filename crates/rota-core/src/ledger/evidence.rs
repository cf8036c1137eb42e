//! What the ledger says about patching, for `rota evidence` (pure): which versions a pool ran
//! at a moment, when a version reached every node of a pool, how old an image is against its
//! channel's `maxAge` and since when a pool is overdue.
//!
//! Worked example: `general@2026.11.2` released 2026-11-20T08:00Z with `maxAge: 30d` is due by
//! 2026-12-20T08:00Z. A pool whose last node on 2026.11.1 (released 2026-10-15, due
//! 2026-11-14) left at 2026-11-21T10:00Z was overdue from 2026-11-14 to 2026-11-21: a breach
//! of seven days, whatever it runs now.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};

use super::life::Life;

/// The lives of one pool, as `(cluster, pool)`.
pub type PoolKey = (String, String);

/// The lives grouped by pool.
pub fn by_pool(lives: &[Life]) -> BTreeMap<PoolKey, Vec<&Life>> {
    let mut out: BTreeMap<PoolKey, Vec<&Life>> = BTreeMap::new();
    for l in lives {
        out.entry((l.cluster.clone(), l.pool.clone()))
            .or_default()
            .push(l);
    }
    out
}

/// Whether `l` was running at `at`.
pub fn running_at(l: &Life, at: DateTime<Utc>) -> bool {
    l.joined <= at && l.left.is_none_or(|left| left > at)
}

/// The versions (or image IDs, where the version is not known) a pool's nodes ran at `at`,
/// with their node counts, most nodes first.
pub fn versions_at(lives: &[&Life], at: DateTime<Utc>) -> Vec<(String, usize)> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for l in lives.iter().filter(|l| running_at(l, at)) {
        *counts.entry(label(l)).or_default() += 1;
    }
    let mut out: Vec<(String, usize)> = counts.into_iter().collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// The version of a life, else its image ID.
pub fn label(l: &Life) -> String {
    l.version.clone().unwrap_or_else(|| l.image.clone())
}

/// The first moment at or after `version`'s first node joined when every node of the pool
/// ran `version`: the rotation reached the whole pool. `None` while any other node still
/// runs (or when the version never ran there).
pub fn reached(lives: &[&Life], version: &str) -> Option<DateTime<Utc>> {
    let first = lives
        .iter()
        .filter(|l| label(l) == version)
        .map(|l| l.joined)
        .min()?;
    // Candidate moments: the first join, and every departure after it. The first of those
    // at which nothing else runs is the answer.
    let mut moments: Vec<DateTime<Utc>> = vec![first];
    moments.extend(lives.iter().filter_map(|l| l.left).filter(|t| *t >= first));
    moments.sort();
    moments.into_iter().find(|&t| {
        let running: Vec<&&Life> = lives.iter().filter(|l| running_at(l, t)).collect();
        !running.is_empty() && running.iter().all(|l| label(l) == version)
    })
}

/// Until when (exclusive) any node of the pool ran `version` (`None`: still running it).
pub fn last_ran(lives: &[&Life], version: &str) -> Option<Option<DateTime<Utc>>> {
    let mine: Vec<&&Life> = lives.iter().filter(|l| label(l) == version).collect();
    if mine.is_empty() {
        return None;
    }
    if mine.iter().any(|l| l.left.is_none()) {
        return Some(None);
    }
    Some(mine.iter().filter_map(|l| l.left).max())
}

/// An image's age and deadline at `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Age {
    pub age: Duration,
    /// `released + maxAge`.
    pub due: Option<DateTime<Utc>>,
    pub overdue: bool,
}

/// The age at `at` of an image released at `released`, against `max_age`. The same
/// arithmetic as the agent's `rota_pool_image_age_seconds` and `rota_pool_image_overdue`:
/// overdue when the age is over `maxAge`, never when the release is in the future.
pub fn age(released: DateTime<Utc>, max_age: Option<Duration>, at: DateTime<Utc>) -> Age {
    let age = (at - released).max(Duration::zero());
    Age {
        age,
        due: max_age.map(|m| released + m),
        overdue: max_age.is_some_and(|m| age > m),
    }
}

/// A pool that ran a version past its deadline: from `due` until `until` (`None`: still).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach {
    pub version: String,
    pub due: DateTime<Utc>,
    pub until: Option<DateTime<Utc>>,
}

/// The breaches of one pool within `[from, to)`: each version it ran past `released +
/// maxAge` (given per version by `deadline`), from the deadline until its last node left.
pub fn breaches(
    lives: &[&Life],
    deadline: impl Fn(&str) -> Option<DateTime<Utc>>,
    from: Option<DateTime<Utc>>,
    to: DateTime<Utc>,
) -> Vec<Breach> {
    let mut versions: Vec<String> = lives.iter().map(|l| label(l)).collect();
    versions.sort();
    versions.dedup();
    let mut out = Vec::new();
    for v in versions {
        let (Some(due), Some(until)) = (deadline(&v), last_ran(lives, &v)) else {
            continue;
        };
        let ended_in_time = until.is_some_and(|u| u <= due);
        let before_period = until.zip(from).is_some_and(|(u, f)| u < f);
        if ended_in_time || before_period || due >= to {
            continue;
        }
        out.push(Breach {
            version: v,
            due,
            until,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(h: i64) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-20T08:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
            + Duration::hours(h)
    }

    fn life(node: &str, version: &str, joined: i64, left: Option<i64>) -> Life {
        Life {
            cluster: "c".into(),
            pool: "p".into(),
            node: node.into(),
            instance: format!("i-{node}"),
            image: format!("ami-{version}"),
            version: Some(format!("general@{version}")),
            joined: t(joined),
            joined_before: None,
            drained_at: None,
            drained_by: None,
            left: left.map(t),
            left_how: None,
            left_rotation: None,
            rotation: None,
            commit: None,
        }
    }

    #[test]
    fn a_version_reaches_a_pool_when_its_last_old_node_leaves() {
        let lives = [
            life("a", "1", 0, Some(10)),
            life("b", "1", 0, Some(12)),
            life("c", "2", 9, None),
            life("d", "2", 11, None),
        ];
        let refs: Vec<&Life> = lives.iter().collect();
        assert_eq!(reached(&refs, "general@2"), Some(t(12)));
        assert_eq!(reached(&refs, "general@1"), Some(t(0)));
        assert_eq!(reached(&refs, "general@3"), None);
        // A tie is ordered by name.
        assert_eq!(
            versions_at(&refs, t(10)),
            vec![("general@1".into(), 1), ("general@2".into(), 1)]
        );
        assert_eq!(versions_at(&refs, t(13)), vec![("general@2".into(), 2)]);
        assert_eq!(last_ran(&refs, "general@1"), Some(Some(t(12))));
        assert_eq!(last_ran(&refs, "general@2"), Some(None));
    }

    #[test]
    fn a_pool_past_its_deadline_is_a_breach_until_its_last_node_left() {
        let lives = [life("a", "1", 0, Some(30)), life("b", "2", 29, None)];
        let refs: Vec<&Life> = lives.iter().collect();
        let deadline = |v: &str| match v {
            "general@1" => Some(t(24)),
            _ => Some(t(1000)),
        };
        let b = breaches(&refs, deadline, None, t(100));
        assert_eq!(
            b,
            vec![Breach {
                version: "general@1".into(),
                due: t(24),
                until: Some(t(30)),
            }]
        );
        // Before the deadline, or a period after the breach: none.
        assert!(breaches(&refs, deadline, None, t(20)).is_empty());
        assert!(breaches(&refs, deadline, Some(t(31)), t(100)).is_empty());
        let a = age(t(0), Some(Duration::hours(24)), t(25));
        assert!(a.overdue);
        assert_eq!(a.due, Some(t(24)));
        assert!(
            !age(t(0), Some(Duration::hours(24)), t(24)).overdue,
            "at the deadline: not yet"
        );
        assert_eq!(age(t(5), None, t(0)).age, Duration::zero());
    }
}
