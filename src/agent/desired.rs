//! What the agent asks of its cluster at one fleet commit: one NodePoolRotation spec per pool,
//! each held at its previous version while the promotion guard says wait, and the pools that
//! left git (released). Pure: the run loop reads the inputs and applies the result.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use rota_core::fleet::resolved::{DesiredCluster, DesiredPool, Mode};
use rota_core::rotate::resource::NodePoolRotationSpec;
use rota_core::waves::{GuardDecision, PoolRecord, Promotion, WaveView, promotion_guard};

/// One pool's desired NodePoolRotation spec, and why it is not the commit's pin (if not).
#[derive(Debug, Clone, PartialEq)]
pub struct PoolIntent {
    pub name: String,
    /// What to server-side-apply; `None` when the pool waits and there is no previous
    /// version to hold (a new pool in a later wave): nothing is created yet.
    pub spec: Option<NodePoolRotationSpec>,
    /// The channel@version the commit pins for this pool.
    pub pinned: (String, String),
    /// Set when the guard holds the pool: its pending status description.
    pub waiting: Option<String>,
    /// Set with `waiting`: what holds the pool, who moves it on and how (`Wait::stop_note`).
    pub held: Option<rota_core::rotate::stop::StopNote>,
}

/// The whole plan for one cluster at one commit.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterIntent {
    pub pools: Vec<PoolIntent>,
    /// NodePoolRotations of this cluster whose pool is no longer in git: released (their spec
    /// set to `mode: ignore`, nodes untouched).
    pub released: Vec<String>,
}

/// Plans every pool of `cluster` at `commit`. `existing` are this cluster's current specs by
/// pool name (from the NodePoolRotations). A pool whose current spec already runs toward the
/// pinned version is not asked again: the guard gates starting a version, not finishing it.
/// Nor is a pool without a spec whose own record says it was adopted on the pin.
#[allow(clippy::too_many_arguments)]
pub fn plan_cluster(
    cluster: &DesiredCluster,
    commit: &str,
    guard_enabled: bool,
    waves: &[WaveView],
    records: &[PoolRecord],
    existing: &BTreeMap<String, NodePoolRotationSpec>,
    now: DateTime<Utc>,
) -> ClusterIntent {
    let mut pools = Vec::new();
    for pool in &cluster.pools {
        let mut spec = NodePoolRotationSpec::from_desired(pool, commit);
        let pinned = (pool.channel.clone(), pool.version.clone());
        let previous = existing.get(&pool.name);
        let decision = if !asks_guard(cluster, pool, records, existing) {
            GuardDecision::Allowed {
                reason: "already on this version".into(),
            }
        } else {
            promotion_guard(
                guard_enabled,
                waves,
                Promotion {
                    wave: &cluster.wave,
                    channel: &pool.channel,
                    version: &pool.version,
                },
                records,
                now,
            )
        };
        let (spec, waiting) = match decision {
            GuardDecision::Allowed { .. } => (Some(spec), None),
            GuardDecision::Waiting(wait) => {
                let why = wait.stop_note(&pool.channel, &pool.version);
                match previous {
                    // Hold the version (and image) the pool had; everything else follows git.
                    Some(prev) => {
                        spec.channel = prev.channel.clone();
                        spec.version = prev.version.clone();
                        spec.image = prev.image.clone();
                        spec.owner_image = prev.owner_image.clone();
                        (Some(spec), Some(why))
                    }
                    None => (None, Some(why)),
                }
            }
        };
        pools.push(PoolIntent {
            name: pool.name.clone(),
            spec,
            pinned,
            waiting: waiting.as_ref().map(|n| n.cause.clone()),
            held: waiting,
        });
    }
    let released = existing
        .iter()
        .filter(|(name, spec)| {
            !cluster.pools.iter().any(|p| &p.name == *name) && spec.mode != Mode::Ignore
        })
        .map(|(name, _)| name.clone())
        .collect();
    ClusterIntent { pools, released }
}

/// Whether `pool` has a pin to act on that the guard gates: not when its current spec already
/// runs toward the pin, nor when its own record says it was adopted on the pin (a pool met
/// for the first time already running it on every node, see `agent::adopt`: nothing to
/// start), nor for an ignored pool (left alone entirely).
fn asks_guard(
    cluster: &DesiredCluster,
    pool: &DesiredPool,
    records: &[PoolRecord],
    existing: &BTreeMap<String, NodePoolRotationSpec>,
) -> bool {
    let previous = existing.get(&pool.name);
    let already = previous.is_some_and(|p| p.channel == pool.channel && p.version == pool.version);
    let adopted = previous.is_none()
        && records.iter().any(|r| {
            r.cluster == cluster.name
                && r.pool == pool.name
                && r.adopted_at(&pool.channel, &pool.version).is_some()
        });
    !(already || adopted || pool.mode == Mode::Ignore)
}

/// The clusters whose notes the agent of `cluster` reads for its decision at this commit:
/// its own, always (its records survive a restart in them), and, for each pool with a pin
/// the guard gates ([`asks_guard`]), every cluster of an earlier wave with a pool on that
/// pool's channel: all that [`promotion_guard`] reads for it. An idle agent (nothing to
/// start, or the guard off, or the first wave) needs no other cluster's notes, so its polls
/// fetch none (docs/gitops.md, "What a poll costs"). `records` need only hold the cluster's
/// own (the adoption check reads nothing else).
pub fn notes_needed(
    cluster: &DesiredCluster,
    guard_enabled: bool,
    waves: &[WaveView],
    records: &[PoolRecord],
    existing: &BTreeMap<String, NodePoolRotationSpec>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::from([cluster.name.clone()]);
    if !guard_enabled {
        return out;
    }
    let Some(k) = waves.iter().position(|w| w.name == cluster.wave) else {
        return out;
    };
    for pool in &cluster.pools {
        if !asks_guard(cluster, pool, records, existing) {
            continue;
        }
        out.extend(
            waves[..k]
                .iter()
                .flat_map(|w| &w.pools)
                .filter(|p| p.channel == pool.channel)
                .map(|p| p.cluster.clone()),
        );
    }
    out
}

/// The spec a released pool keeps: the same, with `mode: ignore` (the controller stops
/// acting on it; its nodes stay as they are).
pub fn released_spec(existing: &NodePoolRotationSpec, commit: &str) -> NodePoolRotationSpec {
    let mut spec = existing.clone();
    spec.mode = Mode::Ignore;
    spec.source_commit = commit.to_string();
    spec
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rota_core::fleet::resolved::{Cloud, DesiredPool, EffectivePolicy, GroupRef};
    use rota_core::waves::PoolRef;
    use std::time::Duration;

    /// One cluster of one pool (`general`) pinned at `version` (also used by `reporting`).
    pub(crate) fn cluster(name: &str, wave: &str, version: &str, mode: Mode) -> DesiredCluster {
        DesiredCluster {
            name: name.into(),
            labels: BTreeMap::new(),
            cloud: Cloud::Aws,
            wave: wave.into(),
            wave_index: usize::from(wave != "canary"),
            mode,
            kubernetes: None,
            pools: vec![DesiredPool {
                owner_image: None,
                cluster: name.into(),
                name: "general".into(),
                channel: "general".into(),
                version: version.into(),
                image: format!("ami-{}", version.replace('.', "")),
                arch: Default::default(),
                kubelet: None,
                released: None,
                max_age: None,
                group: GroupRef::Aws {
                    region: "us-east-1".into(),
                    auto_scaling_group: format!("{name}-general"),
                },
                node_selector: BTreeMap::new(),
                policy: EffectivePolicy::default(),
                gates: vec![],
                mode,
            }],
        }
    }

    fn waves() -> Vec<WaveView> {
        vec![
            WaveView {
                name: "canary".into(),
                soak: Duration::from_secs(3600),
                pools: vec![PoolRef::new("c1", "general", "general")],
            },
            WaveView {
                name: "main".into(),
                soak: Duration::ZERO,
                pools: vec![PoolRef::new("m1", "general", "general")],
            },
        ]
    }

    fn at(h: u32) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(&format!("2026-11-22T{h:02}:00:00Z"))
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn a_held_pool_keeps_its_previous_version_and_says_why() {
        let old = cluster("m1", "main", "2026.11.1", Mode::Reconcile);
        let new = cluster("m1", "main", "2026.11.2", Mode::Reconcile);
        let prev = NodePoolRotationSpec::from_desired(&old.pools[0], "c0");
        let existing = BTreeMap::from([("general".to_string(), prev.clone())]);
        // The canary's agent runs (it has a record) but has not completed the version.
        let running = [PoolRecord::new("c1", "general")];
        let plan = plan_cluster(&new, "c1", true, &waves(), &running, &existing, at(10));
        let pool = &plan.pools[0];
        let spec = pool.spec.as_ref().unwrap();
        assert_eq!(
            (spec.version.as_str(), spec.image.as_str()),
            ("2026.11.1", prev.image.as_str())
        );
        assert_eq!(spec.source_commit, "c1");
        assert_eq!(
            pool.waiting.as_deref(),
            Some("waiting for c1/general (wave canary) to complete general@2026.11.2")
        );
        // Its stop note: rota moves it on, the canary's pool holds it.
        let held = pool.held.as_ref().unwrap();
        assert_eq!(
            (held.reason.as_str(), held.by),
            ("WaveGuard", rota_core::rotate::stop::MovedBy::Rota)
        );
        assert_eq!(held.blocked_by, ["pool c1/general"]);
        assert!(
            held.next.contains("once wave canary completes it"),
            "{}",
            held.next
        );
        // Completed but soaking, then free to go.
        let records = [PoolRecord::new("c1", "general").completed("general", "2026.11.2", at(10))];
        let soaking = plan_cluster(&new, "c1", true, &waves(), &records, &existing, at(10));
        assert!(
            soaking.pools[0]
                .waiting
                .as_deref()
                .unwrap()
                .contains("to soak")
        );
        let free = plan_cluster(&new, "c1", true, &waves(), &records, &existing, at(11));
        assert_eq!(free.pools[0].waiting, None);
        assert_eq!(free.pools[0].spec.as_ref().unwrap().version, "2026.11.2");
        // No record at all from the canary: its agent never reported, and that is what is
        // said.
        let silent = plan_cluster(&new, "c1", true, &waves(), &[], &existing, at(10));
        assert_eq!(
            silent.pools[0].waiting.as_deref(),
            Some(
                "waiting for wave canary: no rota agent has reported from c1 (is one running there?)"
            )
        );
        // A person must start an agent there: the note says so, naming the cluster.
        let held = silent.pools[0].held.as_ref().unwrap();
        assert_eq!(held.by, rota_core::rotate::stop::MovedBy::Person);
        assert_eq!(held.blocked_by, ["cluster c1"]);
        // Guard off: nothing waits.
        let off = plan_cluster(&new, "c1", false, &waves(), &[], &existing, at(10));
        assert_eq!(off.pools[0].waiting, None);
    }

    #[test]
    fn a_new_pool_that_must_wait_is_not_created_and_the_first_wave_never_waits() {
        let new = cluster("m1", "main", "2026.11.2", Mode::Reconcile);
        let plan = plan_cluster(&new, "c1", true, &waves(), &[], &BTreeMap::new(), at(10));
        assert_eq!(plan.pools[0].spec, None);
        assert!(plan.pools[0].waiting.is_some());
        let canary = cluster("c1", "canary", "2026.11.2", Mode::Reconcile);
        let plan = plan_cluster(&canary, "c1", true, &waves(), &[], &BTreeMap::new(), at(10));
        assert!(plan.pools[0].spec.is_some() && plan.pools[0].waiting.is_none());
    }

    #[test]
    fn a_new_pool_adopted_on_its_pin_is_created_with_the_guard_on() {
        let m1 = cluster("m1", "main", "2026.11.2", Mode::Reconcile);
        let adopted = [PoolRecord::new("m1", "general").adopted("general", "2026.11.2", at(10))];
        let plan = plan_cluster(
            &m1,
            "c1",
            true,
            &waves(),
            &adopted,
            &BTreeMap::new(),
            at(10),
        );
        assert_eq!(plan.pools[0].waiting, None);
        assert_eq!(plan.pools[0].spec.as_ref().unwrap().version, "2026.11.2");
        // An adoption of another version, or of another cluster's pool, does not count.
        for other in [
            PoolRecord::new("m1", "general").adopted("general", "2026.11.1", at(10)),
            PoolRecord::new("m2", "general").adopted("general", "2026.11.2", at(10)),
        ] {
            let plan = plan_cluster(
                &m1,
                "c1",
                true,
                &waves(),
                &[other],
                &BTreeMap::new(),
                at(10),
            );
            assert_eq!(plan.pools[0].spec, None);
        }
        // Once the pool has a spec, an old adoption does not let it start the version again.
        let old = cluster("m1", "main", "2026.11.1", Mode::Reconcile);
        let prev = NodePoolRotationSpec::from_desired(&old.pools[0], "c0");
        let existing = BTreeMap::from([("general".to_string(), prev)]);
        let plan = plan_cluster(&m1, "c1", true, &waves(), &adopted, &existing, at(10));
        assert_eq!(plan.pools[0].spec.as_ref().unwrap().version, "2026.11.1");
        assert!(plan.pools[0].waiting.is_some());
    }

    /// What an agent fetches follows what its decision reads: its own notes when idle, and
    /// every cluster of the earlier waves on the pool's channel while a pin waits on the
    /// guard (missing one would make the guard wait on a cluster it cannot see).
    #[test]
    fn an_idle_agent_needs_only_its_own_notes_and_a_waiting_one_every_earlier_cluster() {
        let mut waves = waves();
        waves[0]
            .pools
            .push(PoolRef::new("c2", "general", "general"));
        waves[0].pools.push(PoolRef::new("c3", "gpu", "gpu"));
        waves.push(WaveView {
            name: "late".into(),
            soak: Duration::ZERO,
            pools: vec![PoolRef::new("l1", "general", "general")],
        });
        let old = cluster("m1", "main", "2026.11.1", Mode::Reconcile);
        let new = cluster("m1", "main", "2026.11.2", Mode::Reconcile);
        let on_old = BTreeMap::from([(
            "general".to_string(),
            NodePoolRotationSpec::from_desired(&old.pools[0], "c0"),
        )]);
        let on_new = BTreeMap::from([(
            "general".to_string(),
            NodePoolRotationSpec::from_desired(&new.pools[0], "c1"),
        )]);
        let names = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        // Idle: already on the pin.
        assert_eq!(
            notes_needed(&new, true, &waves, &[], &on_new),
            names(&["m1"])
        );
        // A pin to act on: the earlier wave's clusters on the channel, not the gpu one, not
        // the later wave.
        assert_eq!(
            notes_needed(&new, true, &waves, &[], &on_old),
            names(&["c1", "c2", "m1"])
        );
        // And a new pool with no spec yet.
        assert_eq!(
            notes_needed(&new, true, &waves, &[], &BTreeMap::new()),
            names(&["c1", "c2", "m1"])
        );
        // Adopted on the pin, guard off, first wave, ignored: nothing to wait on.
        let adopted = [PoolRecord::new("m1", "general").adopted("general", "2026.11.2", at(10))];
        assert_eq!(
            notes_needed(&new, true, &waves, &adopted, &BTreeMap::new()),
            names(&["m1"])
        );
        assert_eq!(
            notes_needed(&new, false, &waves, &[], &on_old),
            names(&["m1"])
        );
        let canary = cluster("c1", "canary", "2026.11.2", Mode::Reconcile);
        assert_eq!(
            notes_needed(&canary, true, &waves, &[], &BTreeMap::new()),
            names(&["c1"])
        );
        let ignored = cluster("m1", "main", "2026.11.2", Mode::Ignore);
        assert_eq!(
            notes_needed(&ignored, true, &waves, &[], &on_old),
            names(&["m1"])
        );
        // The guard reads the same clusters: with only them recorded it lets the pin go.
        let done: Vec<PoolRecord> = ["c1", "c2"]
            .iter()
            .map(|c| PoolRecord::new(c, "general").completed("general", "2026.11.2", at(8)))
            .collect();
        let plan = plan_cluster(&new, "c1", true, &waves, &done, &on_old, at(10));
        assert_eq!(plan.pools[0].waiting, None, "{:?}", plan.pools[0]);
        let plan = plan_cluster(&new, "c1", true, &waves, &done[..1], &on_old, at(10));
        assert!(plan.pools[0].waiting.is_some());
    }

    #[test]
    fn pools_gone_from_git_are_released_once_and_ignored_pools_are_not_held() {
        let c = cluster("c1", "canary", "2026.11.1", Mode::Reconcile);
        let mut gone = NodePoolRotationSpec::from_desired(&c.pools[0], "c0");
        gone.pool = "gpu".into();
        let existing = BTreeMap::from([("gpu".to_string(), gone.clone())]);
        let plan = plan_cluster(&c, "c1", true, &waves(), &[], &existing, at(10));
        assert_eq!(plan.released, vec!["gpu".to_string()]);
        let released = released_spec(&gone, "c1");
        assert_eq!(released.mode, Mode::Ignore);
        assert_eq!(released.image, gone.image);
        let again = BTreeMap::from([("gpu".to_string(), released)]);
        assert!(
            plan_cluster(&c, "c1", true, &waves(), &[], &again, at(10))
                .released
                .is_empty()
        );
        // The kill switch: an ignored pool is applied with mode ignore, never held.
        let killed = cluster("m1", "main", "2026.11.2", Mode::Ignore);
        let plan = plan_cluster(&killed, "c2", true, &waves(), &[], &BTreeMap::new(), at(10));
        assert_eq!(plan.pools[0].spec.as_ref().unwrap().mode, Mode::Ignore);
        assert_eq!(plan.pools[0].waiting, None);
    }
}
