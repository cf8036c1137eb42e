//! The promotion guard's rules, and what a change of the fleet repo changes in them. The guard
//! reads `promotion.guard`, the order of the waves, each wave's `soak` and which pools each
//! wave holds; a pull request that edits any of those while it moves a pin would be judged by
//! the rules it brings itself (`soak: 0s` on the canary, `promotion.guard: false`) if the
//! check read them from the PR. `rota promote --check` judges by the base branch's rules
//! instead, and refuses a PR that both promotes and changes them: a person lands the rule
//! change on its own (reviewed as such), then the promotion is judged by it.
//!
//! Worked example: base has canary (soak 1h) then main, guard on; the PR pins main to
//! general@2026.11.2 and sets canary's soak to 0s. [`changes`] answers
//! `["wave canary: soak 1h → 0s"]`, and the check refuses the PR naming both.

use super::guard::WaveView;
use crate::fleet::duration::GoDuration;

/// What the guard reads of one fleet.
#[derive(Debug, Clone, Copy)]
pub struct GuardRules<'a> {
    /// `spec.promotion.guard`.
    pub enabled: bool,
    /// The waves in order, with their soaks and pools.
    pub waves: &'a [WaveView],
}

/// Names shown at most per list in a change; the rest are counted.
const SHOWN: usize = 5;

/// Each difference between `base` and `head` in what the guard reads, one sentence each, in
/// a stable order (the switch, the order, then wave by wave in `head`'s order). Empty: the
/// rules are the same.
pub fn changes(base: GuardRules<'_>, head: GuardRules<'_>) -> Vec<String> {
    let mut out = Vec::new();
    if base.enabled != head.enabled {
        out.push(format!(
            "promotion.guard: {} → {}",
            base.enabled, head.enabled
        ));
    }
    let names = |w: &[WaveView]| w.iter().map(|w| w.name.clone()).collect::<Vec<_>>();
    let (before, after) = (names(base.waves), names(head.waves));
    if before != after {
        out.push(format!(
            "the waves' order: {} → {}",
            list(&before),
            list(&after)
        ));
    }
    for h in head.waves {
        let Some(b) = base.waves.iter().find(|b| b.name == h.name) else {
            continue;
        };
        if b.soak != h.soak {
            out.push(format!(
                "wave {}: soak {} → {}",
                h.name,
                GoDuration::from_secs(b.soak.as_secs()),
                GoDuration::from_secs(h.soak.as_secs())
            ));
        }
        let pool =
            |p: &super::records::PoolRef| format!("{}/{} ({})", p.cluster, p.pool, p.channel);
        let added: Vec<String> = h
            .pools
            .iter()
            .filter(|p| !b.pools.contains(p))
            .map(pool)
            .collect();
        let removed: Vec<String> = b
            .pools
            .iter()
            .filter(|p| !h.pools.contains(p))
            .map(pool)
            .collect();
        if !added.is_empty() {
            out.push(format!("wave {}: pools added: {}", h.name, list(&added)));
        }
        if !removed.is_empty() {
            out.push(format!(
                "wave {}: pools removed: {}",
                h.name,
                list(&removed)
            ));
        }
    }
    out
}

/// `a, b, c` (the first [`SHOWN`], then `and N more`); `(none)` when empty.
fn list(names: &[String]) -> String {
    if names.is_empty() {
        return "(none)".to_string();
    }
    let mut s = names
        .iter()
        .take(SHOWN)
        .map(|n| crate::sanitize::line(n).into_owned())
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        s += &format!(" and {} more", names.len() - SHOWN);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::waves::records::PoolRef;
    use std::time::Duration;

    fn waves(canary_soak: u64) -> Vec<WaveView> {
        vec![
            WaveView {
                name: "canary".into(),
                soak: Duration::from_secs(canary_soak),
                pools: vec![PoolRef::new("canary-1", "general", "general")],
            },
            WaveView {
                name: "main".into(),
                soak: Duration::ZERO,
                pools: vec![PoolRef::new("main-1", "general", "general")],
            },
        ]
    }

    fn rules(enabled: bool, waves: &[WaveView]) -> GuardRules<'_> {
        GuardRules { enabled, waves }
    }

    #[test]
    fn the_same_rules_are_no_change() {
        let w = waves(3600);
        assert!(changes(rules(true, &w), rules(true, &w.clone())).is_empty());
    }

    #[test]
    fn each_rule_the_guard_reads_is_a_change() {
        let base = waves(3600);
        assert_eq!(
            changes(rules(true, &base), rules(false, &base)),
            ["promotion.guard: true → false"]
        );
        assert_eq!(
            changes(rules(true, &base), rules(true, &waves(0))),
            ["wave canary: soak 1h → 0s"]
        );
        let mut swapped = base.clone();
        swapped.reverse();
        assert_eq!(
            changes(rules(true, &base), rules(true, &swapped)),
            ["the waves' order: canary, main → main, canary"]
        );
        // main-1 moved into the canary: the canary then "completes" on a cluster of the
        // PR's choosing.
        let mut moved = base.clone();
        let p = moved[1].pools.remove(0);
        moved[0].pools.push(p);
        assert_eq!(
            changes(rules(true, &base), rules(true, &moved)),
            [
                "wave canary: pools added: main-1/general (general)",
                "wave main: pools removed: main-1/general (general)"
            ]
        );
    }

    #[test]
    fn long_lists_are_cut_and_names_are_one_line() {
        let base = waves(0);
        let mut many = base.clone();
        for i in 0..8 {
            many[0]
                .pools
                .push(PoolRef::new(&format!("c{i}\x1b[2J"), "general", "general"));
        }
        let c = changes(rules(true, &base), rules(true, &many));
        assert_eq!(c.len(), 1);
        assert!(c[0].ends_with("and 3 more"), "{c:?}");
        assert!(!c[0].contains('\x1b'), "{c:?}");
    }
}
