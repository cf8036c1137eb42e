//! `maxParallelPools` across the pools this controller owns: which pool may start a
//! rotation now, per cluster, decided by `rota_core::rotate::parallel::admit` before each
//! pass.

use std::collections::{BTreeMap, HashMap};

use kube::ResourceExt;

use crate::kube::crd::NodePoolRotation;
use rota_core::fleet::resolved::Mode;
use rota_core::rotate::parallel::{PoolDemand, admit};
use rota_core::rotate::{Phase, Stage};

/// `maxParallelPools` over the owned resources, per cluster, in name order: for each pool
/// that would start a rotation, `Some(why)` when it may not now.
pub fn start_holds(nprs: &[NodePoolRotation]) -> HashMap<String, Option<String>> {
    let mut by_cluster: BTreeMap<&str, Vec<&NodePoolRotation>> = BTreeMap::new();
    for n in nprs {
        by_cluster
            .entry(n.spec.cluster.as_str())
            .or_default()
            .push(n);
    }
    let mut out = HashMap::new();
    for pools in by_cluster.values_mut() {
        pools.sort_by_key(|n| n.name_any());
        let max = pools
            .iter()
            .map(|n| n.spec.policy.max_parallel_pools)
            .min()
            .unwrap_or(1);
        let demand: Vec<PoolDemand> = pools
            .iter()
            .map(|n| {
                let status = n.status.as_ref();
                // A pool stopped for a reason of its own (a pod that cannot be evicted, a
                // do-not-disrupt, nodes matching no instance) gives its slot up: its siblings
                // would otherwise wait for the person it waits for. One whose stop may say
                // the image is bad, or that a person paused, keeps it (`Reason::holds_slot`).
                let own_stop = status.is_some_and(|s| {
                    s.phase == Phase::Paused
                        && s.stop
                            .as_ref()
                            .and_then(|n| rota_core::rotate::stop::Reason::parse(&n.reason))
                            .is_some_and(|r| !r.holds_slot())
                });
                let rotating = !own_stop
                    && status
                        .and_then(|s| s.checkpoint.as_ref())
                        .is_some_and(|c| !matches!(c.stage, Stage::Done));
                // Done and nothing new asked since: no demand.
                let settled = status.is_some_and(|s| {
                    matches!(s.phase, Phase::Succeeded | Phase::Failed)
                        && s.observed_generation == n.metadata.generation
                });
                let inert =
                    matches!(n.spec.mode, Mode::Ignore | Mode::ReadOnly) || n.spec.policy.paused;
                PoolDemand {
                    pool: n.name_any(),
                    rotating,
                    waiting: !rotating && !own_stop && !settled && !inert,
                }
            })
            .collect();
        for (pool, hold) in admit(&demand, max) {
            out.insert(pool, hold);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 26 (3): a pool stopped for a reason of its own gives its `maxParallelPools` slot
    /// up; one whose stop may say the image is bad keeps the others held.
    #[test]
    fn a_pool_stopped_for_its_own_reason_frees_its_slot_and_a_bad_image_holds_it() {
        use rota_core::rotate::resource::{NodePoolRotationSpec, NodePoolRotationStatus};
        use rota_core::rotate::stop::{MovedBy, StopNote};
        let fleet = crate::source::read::load_dir(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fleet-repo"),
        )
        .unwrap();
        let clusters = fleet.resolve_all().unwrap();
        let desired = &clusters[0].pools[0];
        let npr = |name: &str, status: Option<NodePoolRotationStatus>| {
            let mut spec = NodePoolRotationSpec::from_desired(desired, "abc");
            spec.policy.max_parallel_pools = 1;
            spec.policy.paused = false;
            let mut n = NodePoolRotation::new(name, spec);
            n.metadata.generation = Some(1);
            n.status = status;
            n
        };
        let stopped = |reason: &str| NodePoolRotationStatus {
            phase: Phase::Paused,
            checkpoint: Some(
                serde_json::from_value(serde_json::json!({
                    "originImage": "ami-old", "targetImage": "ami-new", "targetVersion": "2",
                    "originalDesired": 4, "originalMax": 4, "poolSize": 4, "batchesStarted": 1,
                    "halted": "halted", "stage": {"name": "between"}
                }))
                .unwrap(),
            ),
            stop: Some(StopNote {
                reason: reason.into(),
                by: MovedBy::Person,
                cause: "halted".into(),
                blocked_by: vec![],
                next: "rota ctl retry".into(),
            }),
            observed_generation: Some(1),
            ..Default::default()
        };
        let holds = start_holds(&[npr("a", Some(stopped("DrainTimeout"))), npr("b", None)]);
        assert_eq!(
            holds.get("b"),
            Some(&None),
            "a drain a pod holds frees the slot"
        );
        assert!(
            !holds.contains_key("a"),
            "the stopped pool asks for no slot either"
        );
        for keeps in ["GateFailed", "BatchFailed", "PausedByOperator"] {
            let holds = start_holds(&[npr("a", Some(stopped(keeps))), npr("b", None)]);
            assert_eq!(
                holds.get("b").cloned().flatten().as_deref(),
                Some("maxParallelPools is 1 and pool(s) a are rotating"),
                "{keeps}"
            );
        }
    }
}
