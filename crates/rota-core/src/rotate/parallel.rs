//! `maxParallelPools`: which pools of a cluster may start a rotation now.
//!
//! A pool with a rotation under way keeps its slot until the rotation is done (a started
//! rotation is never stopped to make room). Free slots go to waiting pools in the order given
//! (the agent passes the fleet's order: waves, then pool order in the Cluster document).
//! The result feeds `Observed::start_hold` of each pool.

use std::collections::BTreeMap;

/// One pool of a cluster as admission sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolDemand {
    pub pool: String,
    /// Has a rotation under way (a checkpoint not yet Done).
    pub rotating: bool,
    /// Needs a rotation it has not started.
    pub waiting: bool,
}

/// For each waiting pool, `None` if it may start now, else why not. Pools not waiting are
/// not in the result.
///
/// Worked example, `max = 2`: `a` rotating, `b`, `c`, `d` waiting → `b` may start, `c` and
/// `d` wait for `a` and `b`.
pub fn admit(pools: &[PoolDemand], max: u32) -> BTreeMap<String, Option<String>> {
    let mut holders: Vec<&str> = pools
        .iter()
        .filter(|p| p.rotating)
        .map(|p| p.pool.as_str())
        .collect();
    let mut out = BTreeMap::new();
    for p in pools.iter().filter(|p| p.waiting && !p.rotating) {
        if (holders.len() as u32) < max.max(1) {
            holders.push(&p.pool);
            out.insert(p.pool.clone(), None);
        } else {
            out.insert(
                p.pool.clone(),
                Some(format!(
                    "maxParallelPools is {} and pool(s) {} are rotating",
                    max.max(1),
                    holders.join(", ")
                )),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pool: &str, rotating: bool, waiting: bool) -> PoolDemand {
        PoolDemand {
            pool: pool.into(),
            rotating,
            waiting,
        }
    }

    #[test]
    fn free_slots_go_to_waiting_pools_in_order() {
        let r = admit(
            &[
                p("a", true, false),
                p("b", false, true),
                p("c", false, true),
                p("d", false, false),
                p("e", false, true),
            ],
            2,
        );
        assert_eq!(r["b"], None);
        assert_eq!(
            r["c"].as_deref(),
            Some("maxParallelPools is 2 and pool(s) a, b are rotating")
        );
        assert!(r["e"].is_some());
        assert!(!r.contains_key("a") && !r.contains_key("d"));
    }

    #[test]
    fn rotating_pools_keep_their_slot_even_above_the_limit() {
        // The limit was lowered while two pools rotate: both continue, nobody starts.
        let r = admit(
            &[
                p("a", true, false),
                p("b", true, false),
                p("c", false, true),
            ],
            1,
        );
        assert!(r["c"].is_some());
        assert_eq!(r.len(), 1);
    }
}
