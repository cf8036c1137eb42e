//! The checks of managed pools (`group: {eksNodegroup | karpenterNodePool | gkeNodePool |
//! aksAgentPool}`) that a JSON Schema cannot say: the owner lives in the cluster's cloud, a
//! GCP cluster is regional or zonal, `managedUpdate` is written only where it means
//! something, a version's `gke` form pins a node version; and the warnings: every rollout
//! field a repo writes that the owner of a pool it reaches cannot honour, at the field's line
//! (the capability table is `crate::fleet::owner::support`).

use std::collections::BTreeMap;

use super::diagnostics::Diagnostics;
use super::load::Origin;
use super::model::{Cluster, FleetManifest, GroupSpec, RolloutPolicy};
use super::owner::{
    GKE_CUSTOM_IMAGE_TYPE, Owner, RolloutField, Strategy, Support, support_of_value,
};
use super::platform::Cloud;
use super::yaml::escape_token;

/// The group forms of `cloud`, for hints.
pub fn forms(cloud: Cloud) -> &'static str {
    match cloud {
        Cloud::Aws => "{autoScalingGroup}, {eksNodegroup} or {karpenterNodePool}",
        Cloud::Gcp => "{instanceGroupManager, zone | region} or {gkeNodePool}",
        Cloud::Azure => "{scaleSet, resourceGroup} or {aksAgentPool}",
    }
}

/// A group that names a managed owner: exactly one, in the cluster's cloud, alone. Returns
/// false when the group is self-managed (the caller checks that form).
pub fn check_group(
    origin: &Origin,
    at: &str,
    cloud: Cloud,
    g: &GroupSpec,
    diags: &mut Diagnostics,
) -> bool {
    let managed = g.managed();
    let Some((owner, _)) = managed.first() else {
        return false;
    };
    for (other, _) in managed.iter().skip(1) {
        diags.push(
            origin
                .key_error(
                    &format!("{at}/{}", other.group_key()),
                    format!(
                        "a pool has one owner: `{}` and `{}` both name one",
                        owner.group_key(),
                        other.group_key()
                    ),
                )
                .with_hint(format!("a {cloud} pool's group is {}", forms(cloud))),
        );
    }
    if owner.cloud() != Some(cloud) {
        let home = owner.cloud().map(|c| c.to_string()).unwrap_or_default();
        diags.push(
            origin
                .key_error(
                    &format!("{at}/{}", owner.group_key()),
                    format!(
                        "`{}` names a pool of {}, which lives in {home}; this cluster's cloud is {cloud}",
                        owner.group_key(),
                        owner.service()
                    ),
                )
                .with_hint(format!("a {cloud} pool's group is {}", forms(cloud))),
        );
    }
    let beside = [
        ("autoScalingGroup", g.auto_scaling_group.is_some()),
        ("instanceGroupManager", g.instance_group_manager.is_some()),
        ("zone", g.zone.is_some()),
        ("region", g.region.is_some()),
        ("scaleSet", g.scale_set.is_some()),
        ("resourceGroup", g.resource_group.is_some()),
    ];
    for (field, _) in beside.iter().filter(|(_, set)| *set) {
        diags.push(
            origin
                .key_error(
                    &format!("{at}/{field}"),
                    format!(
                        "`{field}` does not belong beside `{}`: the {} pool's machines are its owner's, rota never addresses them itself",
                        owner.group_key(),
                        owner.service()
                    ),
                )
                .with_hint(format!(
                    "write the group as {{{}: NAME}} alone; the managed cluster's name is the cluster's spec.cloud.{cloud}",
                    owner.group_key()
                )),
        );
    }
    true
}

/// A GCP cluster is regional (`region`) or zonal (`zone`): exactly one.
pub fn check_cloud(origin: &Origin, c: &Cluster, diags: &mut Diagnostics) {
    let Some(gcp) = &c.spec.cloud.gcp else {
        return;
    };
    match (&gcp.region, &gcp.zone) {
        (Some(_), Some(_)) => diags.push(origin.key_error(
            "/spec/cloud/gcp/zone",
            "a gcp cluster has a `region` (regional) or a `zone` (zonal), not both",
        )),
        (None, None) => diags.push(
            origin
                .error("/spec/cloud/gcp", "a gcp cluster needs its `region` or its `zone`")
                .with_hint("regional: gcp: {project, region: us-central1}; zonal: gcp: {project, zone: us-central1-a}"),
        ),
        _ => {}
    }
}

/// `managedUpdate` written on a pool that it cannot reach: a self-managed group (rota
/// rotates it itself) or a Karpenter NodePool (replaced by Karpenter's drift).
pub fn check_managed_update(
    origin: &Origin,
    pp: &str,
    owner: Owner,
    p: &RolloutPolicy,
    diags: &mut Diagnostics,
) {
    if p.managed_update.is_none() || owner.takes_managed_update() {
        return;
    }
    let why = match owner {
        Owner::KarpenterNodePool => {
            "a Karpenter pool is replaced by Karpenter's drift, paced by its disruption budgets; managedUpdate is for EKS, GKE and AKS pools"
        }
        _ => {
            "managedUpdate is for EKS, GKE and AKS pools: rota rotates a self-managed group itself"
        }
    };
    diags.push(
        origin
            .key_error(&format!("{pp}/rollout/managedUpdate"), why)
            .with_hint("remove it, or set it at the cluster or fleet level, where it reaches only the managed pools"),
    );
}

/// A version's `gke` form pins a node version unless it takes the version's `gcp` image.
pub fn check_fleet_versions(origin: &Origin, fleet: &FleetManifest, diags: &mut Diagnostics) {
    for (channel, c) in &fleet.spec.images {
        for (version, images) in &c.versions {
            let Some(g) = &images.gke else { continue };
            if g.image_type != GKE_CUSTOM_IMAGE_TYPE && g.node_version.is_none() {
                diags.push(
                    origin
                        .error(
                            &format!(
                                "/spec/images/{}/versions/{}/gke",
                                escape_token(channel),
                                escape_token(version)
                            ),
                            format!(
                                "{channel}@{version}: gke with imageType {} needs a nodeVersion (the GKE version whose node image the pools take)",
                                g.image_type
                            ),
                        )
                        .with_hint("gke: {nodeVersion: \"1.31.5-gke.1023000\", imageType: COS_CONTAINERD}"),
                );
            }
        }
    }
}

/// The fields a policy sets explicitly (what the repo asks for, not the defaults).
pub fn fields_set(p: &RolloutPolicy) -> Vec<RolloutField> {
    use RolloutField::*;
    let d = p.drain.as_ref();
    [
        (Batch, p.batch.is_some()),
        (Percent, p.percent.is_some()),
        (BatchSoak, p.batch_soak.is_some()),
        (PoolSoak, p.pool_soak.is_some()),
        (MaxParallelPools, p.max_parallel_pools.is_some()),
        (NodeReadyTimeout, p.node_ready_timeout.is_some()),
        (NodeReadyRetries, p.node_ready_retries.is_some()),
        (DrainTimeout, d.is_some_and(|d| d.timeout.is_some())),
        (DrainOnTimeout, d.is_some_and(|d| d.on_timeout.is_some())),
        (
            DrainEvictionInterval,
            d.is_some_and(|d| d.eviction_interval.is_some()),
        ),
        (
            DrainDeleteEmptyDirData,
            d.is_some_and(|d| d.delete_empty_dir_data.is_some()),
        ),
        (
            DrainGracePeriod,
            d.is_some_and(|d| d.grace_period.is_some()),
        ),
        (OnGateFailure, p.on_gate_failure.is_some()),
        (Paused, p.paused.is_some()),
        (Pipeline, p.pipeline.is_some()),
        (Windows, p.windows.is_some()),
        (Strategy, p.strategy.is_some()),
    ]
    .into_iter()
    .filter_map(|(f, set)| set.then_some(f))
    .collect()
}

/// Where one written field sits: which document and pointer, and whether its value asks
/// for force (`drain.onTimeout: force`, which an owner may honour where `pause` is not).
type FieldAt<'a> = (&'a Origin, String, RolloutField, bool);

/// The fields `p` (the `rollout` below `prefix` in `origin`) writes, with their pointers.
fn written_at<'a>(prefix: &str, origin: &'a Origin, p: &RolloutPolicy, out: &mut Vec<FieldAt<'a>>) {
    let forces = p
        .drain
        .as_ref()
        .is_some_and(|d| d.on_timeout == Some(super::resolved::OnDrainTimeout::Force));
    for f in fields_set(p) {
        let pointer = format!("{prefix}/rollout{}", f.pointer().unwrap_or_default());
        out.push((
            origin,
            pointer,
            f,
            forces && f == RolloutField::DrainOnTimeout,
        ));
    }
}

/// One warning per written rollout field and owner+strategy that cannot honour it, at the
/// field's line, naming the pools it reaches (a fleet-wide `batchSoak` reaches every managed
/// pool of the fleet: one warning, not one per pool).
pub fn warnings(
    fleet: Option<&(Origin, FleetManifest)>,
    clusters: &BTreeMap<String, (Origin, Cluster)>,
) -> Diagnostics {
    type Reached = BTreeMap<(String, u32, u32, String, Owner, Strategy), (Support, Vec<String>)>;
    let mut reached: Reached = BTreeMap::new();
    let mut at: BTreeMap<(String, u32, u32, String), (&Origin, String)> = BTreeMap::new();
    for (name, (origin, c)) in clusters {
        for (i, pool) in c.spec.pools.iter().enumerate() {
            let owner = pool.group.owner();
            if owner == Owner::SelfManaged || owner.cloud() != c.spec.cloud_kind() {
                continue;
            }
            let update = pool
                .rollout
                .managed_update
                .or(c.spec.rollout.managed_update)
                .or(fleet.and_then(|(_, f)| f.spec.rollout.managed_update));
            let strategy = owner.strategy(update);
            let mut written: Vec<FieldAt> = Vec::new();
            if let Some((fo, f)) = fleet {
                written_at("/spec", fo, &f.spec.rollout, &mut written);
            }
            written_at("/spec", origin, &c.spec.rollout, &mut written);
            written_at(
                &format!("/spec/pools/{i}"),
                origin,
                &pool.rollout,
                &mut written,
            );
            for (o, pointer, field, forces) in written {
                let s = support_of_value(owner, strategy, field, forces);
                if s.honoured() {
                    continue;
                }
                let loc = o.key_at(&pointer);
                let key = (loc.file.clone(), loc.line, loc.column, pointer.clone());
                at.entry(key.clone()).or_insert((o, pointer.clone()));
                reached
                    .entry((key.0, key.1, key.2, key.3, owner, strategy))
                    .or_insert((s, Vec::new()))
                    .1
                    .push(format!("{name}/{}", pool.name));
            }
        }
    }
    let mut out = Diagnostics::new();
    for ((file, line, col, pointer, owner, strategy), (s, pools)) in reached {
        let Some((o, p)) = at.get(&(file, line, col, pointer)) else {
            continue;
        };
        let field = p
            .rsplit("/rollout/")
            .next()
            .unwrap_or_default()
            .replace('/', ".");
        let shown: Vec<&str> = pools.iter().take(5).map(String::as_str).collect();
        let more = pools.len().saturating_sub(shown.len());
        let named = if more > 0 {
            format!("{} and {more} more", shown.join(", "))
        } else {
            shown.join(", ")
        };
        out.push(
            o.key_error(
                p,
                format!(
                    "rollout.{field} is not honoured for {} pools replaced by {strategy} ({named}): {}",
                    owner.group_key(),
                    s.how()
                ),
            )
            .with_hint(format!(
                "{}see the capability matrix in docs/cloud-{}.md; `rota render` shows what each pool keeps",
                if owner.takes_managed_update() && strategy == Strategy::Service {
                    "managedUpdate: blueGreen keeps rota's own batches, soaks and drain; "
                } else {
                    ""
                },
                owner.cloud().map(|c| c.to_string()).unwrap_or_default()
            )),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::fleet::load_files;
    use crate::fleet::owner::{ManagedGroup, ManagedUpdate, Owner, OwnerImage, Strategy};
    use crate::fleet::resolved::GroupRef;
    use crate::fleet::source_file::SourceFile;
    use crate::fleet::valid::Fleet;

    /// A fleet with one pool of each owner beside a self-managed one; `extra` is appended to
    /// the Fleet's rollout.
    fn repo(extra: &str) -> String {
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
          gcp: projects/acme/global/images/general-1-0-0
          gke: {{nodeVersion: "1.31.5-gke.1023000", imageType: COS_CONTAINERD}}
          aks: {{nodeImageVersion: AKSUbuntu-2204gen2containerd-202611.02.0}}
          azure: /subscriptions/s1/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/general/versions/1.0.0
  waves:
    - name: all
      clusters: [eks, gke, aks]
      images: {{general: "1.0.0"}}
  rollout:
    batch: 2{extra}
---
apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {{name: eks}}
spec:
  cloud: {{aws: {{region: us-east-1, eksCluster: prod-eks}}}}
  pools:
    - name: asg
      channel: general
      nodeSelector: {{pool: asg}}
      group: {{autoScalingGroup: asg-general}}
    - name: ng
      channel: general
      nodeSelector: {{eks.amazonaws.com/nodegroup: general}}
      group: {{eksNodegroup: general}}
      rollout:
        managedUpdate: blueGreen
        batchSoak: 10m
    - name: karp
      channel: general
      nodeSelector: {{karpenter.sh/nodepool: default}}
      group: {{karpenterNodePool: default}}
---
apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {{name: gke}}
spec:
  cloud: {{gcp: {{project: acme-prod, zone: us-central1-a}}}}
  pools:
    - name: general
      channel: general
      nodeSelector: {{cloud.google.com/gke-nodepool: general}}
      group: {{gkeNodePool: general}}
---
apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {{name: aks}}
spec:
  cloud: {{azure: {{subscriptionId: s1, resourceGroup: prod, aksCluster: prod-aks}}}}
  pools:
    - name: general
      channel: general
      nodeSelector: {{kubernetes.azure.com/agentpool: general}}
      group: {{aksAgentPool: general}}
"#
        )
    }

    fn load(text: &str) -> Fleet {
        load_files(&[SourceFile::new("fleet.yaml", text)]).unwrap_or_else(|d| panic!("{d}"))
    }

    #[test]
    fn each_owner_resolves_with_its_cluster_strategy_and_image() {
        let fleet = load(&repo(""));
        let eks = fleet.resolve_cluster("eks").unwrap();
        let (asg, ng, karp) = (&eks.pools[0], &eks.pools[1], &eks.pools[2]);
        assert_eq!(asg.owner(), Owner::SelfManaged);
        assert_eq!(asg.strategy(), Strategy::Rota);
        assert_eq!(
            (asg.owner_image.as_ref(), asg.policy.managed_update),
            (None, None)
        );
        assert_eq!(
            ng.group,
            GroupRef::Managed(ManagedGroup::EksNodegroup {
                region: "us-east-1".into(),
                eks_cluster: "prod-eks".into(),
                nodegroup: "general".into(),
            })
        );
        assert_eq!(ng.strategy(), Strategy::BlueGreen);
        assert_eq!(ng.image, "ami-0a1b2c3d4e5f60718");
        assert_eq!(
            ng.owner_image,
            Some(OwnerImage::Ami {
                id: "ami-0a1b2c3d4e5f60718".into()
            })
        );
        // Karpenter is replaced by its drift: managedUpdate does not reach it.
        assert_eq!(
            (karp.strategy(), karp.policy.managed_update),
            (Strategy::Drift, None)
        );

        // The managed cluster's name defaults to the Cluster's; a zonal cluster's location
        // is its zone.
        let gke = &fleet.resolve_cluster("gke").unwrap().pools[0];
        assert_eq!(gke.group.managed().unwrap().cluster(), "gke");
        assert_eq!(
            gke.group.to_string(),
            "gcp:acme-prod/us-central1-a/gke/gke/nodepool/general"
        );
        assert_eq!(gke.policy.managed_update, Some(ManagedUpdate::Service));
        assert_eq!(gke.image, "1.31.5-gke.1023000/COS_CONTAINERD");

        let aks = &fleet.resolve_cluster("aks").unwrap().pools[0];
        assert_eq!(aks.group.managed().unwrap().cluster(), "prod-aks");
        assert_eq!(aks.image, "AKSUbuntu-2204gen2containerd-202611.02.0");
        assert_eq!(aks.strategy(), Strategy::Service);
    }

    #[test]
    fn a_self_managed_pool_serializes_as_before() {
        let fleet = load(&repo(""));
        let asg = &fleet.resolve_cluster("eks").unwrap().pools[0];
        let v = serde_json::to_value(asg).unwrap();
        for absent in ["ownerImage", "owner", "strategy"] {
            assert!(v.get(absent).is_none(), "{absent} in {v}");
        }
        assert!(v["policy"].get("managedUpdate").is_none(), "{v}");
        assert_eq!(
            v["group"],
            serde_json::json!({"aws": {"region": "us-east-1", "autoScalingGroup": "asg-general"}})
        );
    }

    #[test]
    fn a_written_field_the_owner_cannot_honour_warns_at_its_line() {
        let text = repo("\n    drain:\n      evictionInterval: 30s");
        let fleet = load(&text);
        let line_of = |needle: &str| {
            text.lines()
                .position(|l| l.contains(needle))
                .map(|i| i as u32 + 1)
                .unwrap()
        };
        let w = fleet.warnings();
        // The fleet's evictionInterval: lost for the service updates (GKE, AKS) and for
        // Karpenter's drift, honoured by the blue-green EKS pool and the ASG.
        let at: Vec<_> = w
            .iter()
            .filter(|d| d.line == line_of("evictionInterval"))
            .collect();
        assert_eq!(
            at.len(),
            3,
            "{}",
            w.render_warnings(crate::fleet::diagnostics::Format::Human)
        );
        assert!(at.iter().any(|d| {
            d.message
                .contains("gkeNodePool pools replaced by service (gke/general)")
        }));
        assert!(at.iter().any(|d| {
            d.message
                .contains("karpenterNodePool pools replaced by drift (eks/karp)")
        }));
        assert!(
            at.iter()
                .all(|d| d.path == "spec.rollout.drain.evictionInterval")
        );
        // The blue-green pool's batchSoak is rota's own: no warning there. The fleet's batch
        // is honoured everywhere (by the service's own setting where there is one).
        assert!(!w.iter().any(|d| d.line == line_of("batchSoak: 10m")));
        assert!(!w.iter().any(|d| d.line == line_of("batch: 2")));
        // Every warning names a pool and the reason: nothing silent.
        assert!(
            w.iter()
                .all(|d| d.message.contains(": ") && d.hint.is_some())
        );
    }

    /// `drain.onTimeout: force` is lost on AKS's own upgrade (nothing there forces), while
    /// `pause` is its (the upgrade fails at drainTimeoutInMinutes): only force warns there.
    #[test]
    fn force_on_an_aks_service_pool_warns_and_pause_does_not() {
        let warned = |value: &str| {
            let text = repo(&format!("\n    drain:\n      onTimeout: {value}"));
            let line = text.lines().position(|l| l.contains("onTimeout")).unwrap() as u32 + 1;
            load(&text)
                .warnings()
                .iter()
                .filter(|d| d.line == line)
                .map(|d| d.message.clone())
                .collect::<Vec<_>>()
        };
        let force = warned("force");
        assert!(
            force
                .iter()
                .any(|m| m.contains("aksAgentPool pools replaced by service")
                    && m.contains("nothing that forces")),
            "{force:?}"
        );
        let pause = warned("pause");
        assert!(
            !pause.iter().any(|m| m.contains("aksAgentPool")),
            "{pause:?}"
        );
        // GKE and Karpenter lose either value, as before.
        assert_eq!(force.len(), pause.len() + 1, "{force:?} {pause:?}");
    }

    #[test]
    fn a_soak_on_a_service_update_warns_and_blue_green_silences_it() {
        let text = repo("").replace(
            "        managedUpdate: blueGreen\n",
            "        managedUpdate: service\n",
        );
        let fleet = load(&text);
        let line = text
            .lines()
            .position(|l| l.contains("batchSoak: 10m"))
            .unwrap() as u32
            + 1;
        let w: Vec<_> = fleet.warnings().iter().filter(|d| d.line == line).collect();
        assert_eq!(w.len(), 1, "{:?}", fleet.warnings());
        assert!(w[0].message.contains("rollout.batchSoak is not honoured for eksNodegroup pools replaced by service (eks/ng)"), "{}", w[0].message);
        assert!(
            w[0].hint
                .as_deref()
                .unwrap()
                .contains("managedUpdate: blueGreen")
        );
        // No warning at all without the managed pools' lost fields.
        assert!(
            load(&repo("")).warnings().is_empty(),
            "{:?}",
            load(&repo("")).warnings()
        );
    }

    #[test]
    fn a_self_managed_repo_has_no_warning_whatever_it_sets() {
        let text = repo("\n    batchSoak: 5m\n    drain: {evictionInterval: 10s, timeout: 5m}");
        // Only the ASG pool left.
        let cut = text.find("    - name: ng").unwrap();
        let end = text
            .find("---\napiVersion: rota.dev/v1alpha1\nkind: Cluster\nmetadata: {name: gke}")
            .unwrap();
        let only_asg = format!("{}{}", &text[..cut], &text[end..]);
        let only_asg = only_asg
            .split("---\n")
            .filter(|d| !d.contains("name: gke}") && !d.contains("name: aks}"))
            .collect::<Vec<_>>()
            .join("---\n")
            .replace("clusters: [eks, gke, aks]", "clusters: [eks]");
        let fleet = load(&only_asg);
        assert!(fleet.warnings().is_empty(), "{:?}", fleet.warnings());
    }
}
