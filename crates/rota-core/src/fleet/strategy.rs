//! `rollout.strategy` checked against the pool it reaches: which owners can replace a pool
//! drain-first, and which combinations the contract makes meaningless.
//!
//! `strategy: replace` is rota's own batch order for a self-managed group
//! (`rotate::plan::replace`), and the owner's own no-surge setting for a managed pool under
//! `managedUpdate: service` (`rotate::managed` sends it with the update: EKS
//! `updateConfig.updateStrategy: MINIMAL`, GKE and AKS `upgradeSettings` with `maxSurge` 0
//! and `maxUnavailable` the batch). A pool whose owner replaces its nodes otherwise cannot
//! take it: Karpenter's drift always launches the replacement before it drains; a
//! blue-green move brings a whole twin pool up before the old one drains. Each is refused
//! at the line of the `strategy` that reached the pool, naming the pool, rather than letting
//! a pool with no room for a surge surge anyway. A written `pipeline: true` beside
//! `strategy: replace` is refused too: pipelining brings the next batch up during a soak,
//! and a replace batch has nothing to bring up before it removes.

use super::diagnostics::Diagnostics;
use super::load::Origin;
use super::model::{Pool, RolloutPolicy};
use super::owner::{ManagedUpdate, Owner};
use super::resolved::RolloutStrategy;

/// One level of rollout policy that may set the strategy: where it is written.
pub struct Level<'a> {
    pub origin: &'a Origin,
    /// The JSON pointer of the `rollout` object (`/spec/rollout`, `/spec/pools/0/rollout`).
    pub pointer: String,
    pub policy: &'a RolloutPolicy,
}

/// The checks for one pool, given the levels that reach it, outermost first (fleet,
/// cluster, pool).
pub fn check_pool(cluster: &str, pool: &Pool, levels: &[Level<'_>], diags: &mut Diagnostics) {
    let Some((at, strategy)) = levels
        .iter()
        .rev()
        .find_map(|l| l.policy.strategy.map(|s| (l, s)))
    else {
        return;
    };
    if strategy != RolloutStrategy::Replace {
        return;
    }
    let pointer = format!("{}/strategy", at.pointer);
    if at.policy.pipeline == Some(true) {
        diags.push(
            at.origin
                .key_error(
                    &format!("{}/pipeline", at.pointer),
                    "pipeline: true with strategy: replace: a replace batch brings nothing up before it removes its nodes, so there is no next batch to bring up during a soak",
                )
                .with_hint("remove pipeline (a replace pool never pipelines)"),
        );
    }
    let owner = pool.group.owner();
    let update = levels
        .iter()
        .rev()
        .find_map(|l| l.policy.managed_update)
        .unwrap_or_default();
    let why = match (owner, update) {
        (Owner::SelfManaged, _) => return,
        (Owner::KarpenterNodePool, _) => {
            "Karpenter's drift launches each replacement before it drains the node it replaces; it has no drain-first mode"
        }
        (_, ManagedUpdate::BlueGreen) => {
            "managedUpdate blueGreen brings a whole twin pool up before the old one drains: the opposite of a drain-first rotation"
        }
        // The owner's own update, told not to surge (`no_surge_setting`).
        (_, ManagedUpdate::Service) => return,
    };
    diags.push(
        at.origin
            .key_error(
                &pointer,
                format!(
                    "strategy: replace reaches pool {cluster}/{} ({}: {}), which cannot take it: {why}",
                    pool.name,
                    owner.group_key(),
                    pool.group.managed().first().map_or("", |(_, n)| *n)
                ),
            )
            .with_hint(format!(
                "set strategy: surge on pool {} (or write strategy: replace only on self-managed pools and on managed pools under managedUpdate: service)",
                pool.name
            )),
    );
}

/// What `rota render` says beside a pool replaced drain-first: by how much its capacity
/// dips while a batch is out, and for a managed pool the owner's setting that carries it.
/// `None` for a surge pool (its capacity never dips).
pub fn capacity_note(policy: &super::resolved::EffectivePolicy, owner: Owner) -> Option<String> {
    if policy.strategy != RolloutStrategy::Replace {
        return None;
    }
    let batch = match policy.batch {
        super::resolved::BatchSize::Count(1) => "1 node".to_string(),
        super::resolved::BatchSize::Count(n) => format!("{n} nodes"),
        super::resolved::BatchSize::Percent(p) => format!("{p}% of the pool, rounded up"),
    };
    Some(match no_surge_setting(owner) {
        Some(setting) => format!(
            "strategy replace: {}'s own update with {setting}: no surge, never a node more than before; capacity dips by up to one batch ({batch}) while the owner replaces nodes",
            owner.service()
        ),
        None => format!(
            "strategy replace: no surge, never a node more than before a batch; capacity dips by one batch ({batch}) from its cordon until the group's replacements are Ready"
        ),
    })
}

/// The owner's setting that carries a drain-first update (`managedUpdate: service`); `None`
/// where rota replaces the nodes itself (a self-managed group).
fn no_surge_setting(owner: Owner) -> Option<&'static str> {
    match owner {
        Owner::EksNodegroup => {
            Some("updateConfig updateStrategy MINIMAL and maxUnavailable the batch")
        }
        Owner::GkeNodePool => Some("upgradeSettings maxSurge 0 and maxUnavailable the batch"),
        Owner::AksAgentPool => Some("upgradeSettings maxSurge 0 and maxUnavailable the batch"),
        Owner::SelfManaged | Owner::KarpenterNodePool => None,
    }
}

#[cfg(test)]
mod tests {
    use crate::fleet::load_files;
    use crate::fleet::resolved::RolloutStrategy;
    use crate::fleet::source_file::SourceFile;

    /// A fleet with a self-managed pool beside an EKS node group under each update and a
    /// Karpenter pool; `fleet` is appended to the Fleet's rollout, `asg` to the
    /// self-managed pool's.
    fn repo(fleet: &str, asg: &str) -> String {
        format!(
            r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {{name: acme}}
spec:
  images:
    general:
      versions:
        "1.0.0":
          aws: {{us-east-1: ami-0a1b2c3d4e5f60718}}
  waves:
    - name: all
      clusters: [eks]
      images: {{general: "1.0.0"}}
  rollout:
    batch: 2{fleet}
---
apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {{name: eks}}
spec:
  cloud: {{aws: {{region: us-east-1}}}}
  pools:
    - name: asg
      channel: general
      nodeSelector: {{pool: asg}}
      group: {{autoScalingGroup: asg-general}}
      rollout:
        batchSoak: 1m{asg}
    - name: ng
      channel: general
      nodeSelector: {{eks.amazonaws.com/nodegroup: general}}
      group: {{eksNodegroup: general}}
    - name: twin
      channel: general
      nodeSelector: {{eks.amazonaws.com/nodegroup: twin}}
      group: {{eksNodegroup: twin}}
      rollout:
        managedUpdate: blueGreen
    - name: karp
      channel: general
      nodeSelector: {{karpenter.sh/nodepool: default}}
      group: {{karpenterNodePool: default}}
"#
        )
    }

    fn errors(text: &str) -> String {
        match load_files(&[SourceFile::new("fleet.yaml", text)]) {
            Ok(_) => String::new(),
            Err(d) => d.to_string(),
        }
    }

    #[test]
    fn replace_on_a_self_managed_pool_resolves_and_leaves_the_others_surging() {
        let text = repo("", "\n        strategy: replace");
        let fleet =
            load_files(&[SourceFile::new("fleet.yaml", &text)]).unwrap_or_else(|d| panic!("{d}"));
        let c = fleet.resolve_cluster("eks").unwrap();
        let by_pool: Vec<(&str, RolloutStrategy)> = c
            .pools
            .iter()
            .map(|p| (p.name.as_str(), p.policy.strategy))
            .collect();
        assert_eq!(
            by_pool,
            [
                ("asg", RolloutStrategy::Replace),
                ("ng", RolloutStrategy::Surge),
                ("twin", RolloutStrategy::Surge),
                ("karp", RolloutStrategy::Surge),
            ]
        );
    }

    #[test]
    fn replace_reaching_an_owner_that_surges_is_refused_at_its_line_naming_each_pool() {
        let e = errors(&repo("\n    strategy: replace", ""));
        // One error per pool it reaches that cannot take it, at the fleet's strategy line;
        // the EKS node group under `managedUpdate: service` takes it (EKS's MINIMAL).
        assert!(!e.contains("eks/ng "), "{e}");
        for (pool, why) in [
            (
                "eks/twin",
                "managedUpdate blueGreen brings a whole twin pool up",
            ),
            ("eks/karp", "Karpenter's drift launches each replacement"),
        ] {
            let line = e
                .lines()
                .find(|l| l.contains(&format!("reaches pool {pool} ")))
                .unwrap_or_else(|| panic!("no error for {pool}: {e}"));
            assert!(line.starts_with("fleet.yaml:16:"), "{line}");
            assert!(line.contains(why), "{line}");
        }
        assert!(!e.contains("eks/asg"), "{e}");
    }

    #[test]
    fn a_written_pipeline_beside_replace_is_refused() {
        let e = errors(&repo(
            "",
            "\n        strategy: replace\n        pipeline: true",
        ));
        assert!(e.contains("pipeline: true with strategy: replace"), "{e}");
        assert!(e.starts_with("fleet.yaml:30:9:"), "{e}");
        // A pipeline written at the fleet level is a default, not a contradiction.
        assert_eq!(
            errors(&repo("\n    pipeline: true", "\n        strategy: replace")),
            ""
        );
    }

    #[test]
    fn render_says_by_how_much_a_replace_pool_dips() {
        use crate::fleet::owner::Owner;
        use crate::fleet::resolved::{BatchSize, EffectivePolicy};
        let mut p = EffectivePolicy::default();
        assert_eq!(super::capacity_note(&p, Owner::SelfManaged), None);
        assert_eq!(super::capacity_note(&p, Owner::GkeNodePool), None);
        p.strategy = RolloutStrategy::Replace;
        p.batch = BatchSize::Count(2);
        let note = super::capacity_note(&p, Owner::SelfManaged).unwrap();
        assert!(
            note.contains("capacity dips by one batch (2 nodes)"),
            "{note}"
        );
        p.batch = BatchSize::Percent(25);
        let note = super::capacity_note(&p, Owner::SelfManaged).unwrap();
        assert!(note.contains("(25% of the pool, rounded up)"), "{note}");
        // A managed pool's note names the owner's setting that carries it.
        p.batch = BatchSize::Count(1);
        for (owner, setting) in [
            (
                Owner::EksNodegroup,
                "EKS's own update with updateConfig updateStrategy MINIMAL",
            ),
            (
                Owner::GkeNodePool,
                "upgradeSettings maxSurge 0 and maxUnavailable",
            ),
            (
                Owner::AksAgentPool,
                "upgradeSettings maxSurge 0 and maxUnavailable",
            ),
        ] {
            let note = super::capacity_note(&p, owner).unwrap();
            assert!(note.contains(setting), "{note}");
            assert!(note.contains("dips by up to one batch (1 node)"), "{note}");
        }
    }

    #[test]
    fn replace_on_a_managed_service_pool_resolves() {
        let text = repo("", "").replace(
            "      group: {eksNodegroup: general}\n",
            "      group: {eksNodegroup: general}\n      rollout: {strategy: replace}\n",
        );
        let fleet =
            load_files(&[SourceFile::new("fleet.yaml", &text)]).unwrap_or_else(|d| panic!("{d}"));
        let c = fleet.resolve_cluster("eks").unwrap();
        let ng = c.pools.iter().find(|p| p.name == "ng").unwrap();
        assert_eq!(ng.policy.strategy, RolloutStrategy::Replace);
    }

    #[test]
    fn an_unknown_strategy_is_refused_by_the_schema() {
        let e = errors(&repo("", "\n        strategy: drainfirst"));
        assert!(e.contains("strategy"), "{e}");
    }
}
