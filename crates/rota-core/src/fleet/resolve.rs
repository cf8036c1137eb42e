//! Resolution of one cluster's desired state: its wave, the pins of that wave turned into image
//! IDs for the cluster's cloud, the rollout policy deep-merged fleet → cluster → pool over the
//! defaults, the gates by name, and the mode.
//!
//! Merge rule: a field set at a lower level replaces the one above; `drain` is merged field by
//! field; `windows` is a list and is replaced as a whole (a pool that sets `windows: []` runs
//! at any time even if its cluster has windows).
//!
//! Mode rule: the most specific `mode` that is set wins (pool, else cluster, else fleet, else
//! `reconcile`), except that `ignore` on an ancestor always wins: `mode: ignore` on the Fleet
//! is the kill switch, `ignore` on a Cluster silences all its pools whatever they say.
//! Example: fleet `readOnly`, cluster unset, pool `reconcile` → `reconcile` (a trial pool
//! during onboarding); fleet `ignore`, pool `reconcile` → `ignore`.

use super::duration::GoDuration;
use super::model::{Cluster, GroupSpec, HealthGate, RolloutPolicy};
use super::owner::{ManagedGroup, Owner};
use super::resolved::{
    Cloud, DesiredCluster, DesiredPool, EffectivePolicy, GateCheck, GroupRef, Mode, ResolvedGate,
    Window,
};
use super::valid::Fleet;

/// Why a cluster could not be resolved. After a successful load only `UnknownCluster` can
/// happen; the others guard against a `Fleet` built by hand.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("no cluster named `{name}` in the fleet repo{}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    UnknownCluster {
        name: String,
        suggestion: Option<String>,
    },
    #[error("cluster `{cluster}`: {why}")]
    Invalid { cluster: String, why: String },
}

/// Combine modes from the outermost scope inwards (see the module header).
pub fn combine_modes(scopes: &[Option<Mode>]) -> Mode {
    let mut mode = Mode::Reconcile;
    for m in scopes.iter().flatten() {
        if mode == Mode::Ignore {
            break;
        }
        mode = *m;
    }
    mode
}

/// Apply one level of rollout policy over `eff`.
pub fn merge_policy(eff: &mut EffectivePolicy, p: &RolloutPolicy) {
    if let Some(v) = p.batch {
        eff.batch = v;
    }
    if let Some(v) = p.percent {
        eff.percent = v;
    }
    if let Some(v) = p.batch_soak {
        eff.batch_soak = v;
    }
    if let Some(v) = p.pool_soak {
        eff.pool_soak = v;
    }
    if let Some(v) = p.max_parallel_pools {
        eff.max_parallel_pools = v;
    }
    if let Some(v) = p.node_ready_timeout {
        eff.node_ready_timeout = v;
    }
    if let Some(v) = p.node_ready_retries {
        eff.node_ready_retries = v;
    }
    if let Some(d) = &p.drain {
        if let Some(v) = d.timeout {
            eff.drain.timeout = v;
        }
        if let Some(v) = d.on_timeout {
            eff.drain.on_timeout = v;
        }
        if let Some(v) = d.eviction_interval {
            eff.drain.eviction_interval = v;
        }
        if let Some(v) = d.delete_empty_dir_data {
            eff.drain.delete_empty_dir_data = v;
        }
        if d.grace_period.is_some() {
            eff.drain.grace_period = d.grace_period;
        }
        if let Some(v) = d.delay {
            eff.drain.delay = v;
        }
        if d.max_deferral.is_some() {
            eff.drain.max_deferral = d.max_deferral;
        }
    }
    if let Some(v) = p.on_gate_failure {
        eff.on_gate_failure = v;
    }
    if let Some(v) = p.paused {
        eff.paused = v;
    }
    if let Some(v) = p.pipeline {
        eff.pipeline = v;
    }
    if p.managed_update.is_some() {
        eff.managed_update = p.managed_update;
    }
    if let Some(v) = p.strategy {
        eff.strategy = v;
    }
    if let Some(ws) = &p.windows {
        eff.windows = ws
            .iter()
            .map(|w| Window {
                days: w.days.clone(),
                start: w.start.clone(),
                end: w.end.clone(),
                time_zone: w.time_zone.clone().unwrap_or_else(|| "UTC".to_string()),
            })
            .collect();
    }
    if let Some(bs) = &p.blackouts {
        eff.blackouts = bs
            .iter()
            .map(|b| super::resolved::Blackout {
                from: b.from,
                to: b.to,
                reason: b.reason.clone().unwrap_or_default(),
            })
            .collect();
    }
}

/// A gate with its defaults applied (interval 30s, 3 samples, no failure tolerated).
pub fn resolve_gate(g: &HealthGate) -> Option<ResolvedGate> {
    let s = &g.spec;
    let check = if let Some(p) = &s.prometheus {
        GateCheck::Prometheus {
            address: p.address.clone(),
            query: p.query.clone(),
            min: p.min,
            max: p.max,
            on_no_data: p.on_no_data.unwrap_or_default(),
        }
    } else if let Some(p) = &s.pods {
        GateCheck::Pods {
            namespaces: p.namespaces.clone(),
            max_not_ready: p.max_not_ready.clone(),
            max_pending: p.max_pending,
        }
    } else {
        let e = s.events.as_ref()?;
        GateCheck::Events {
            reasons: e.reasons.clone(),
            max: e.max,
            window: e.window,
        }
    };
    Some(ResolvedGate {
        name: g.metadata.name.clone(),
        interval: s.interval.unwrap_or(GoDuration::from_secs(30)),
        samples: s.samples.unwrap_or(3),
        failure_limit: s.failure_limit.unwrap_or(0),
        check,
    })
}

/// The managed pool a group names, qualified by its cluster's cloud (the managed cluster's
/// name defaults to the Cluster's own); `None` for a self-managed group or a mismatch.
fn managed_group(c: &Cluster, g: &GroupSpec) -> Option<ManagedGroup> {
    let cloud = &c.spec.cloud;
    let named = |n: &Option<String>| n.clone().unwrap_or_else(|| c.metadata.name.clone());
    let (owner, name) = g.managed().first().map(|(o, n)| (*o, n.to_string()))?;
    Some(match owner {
        Owner::SelfManaged => return None,
        Owner::EksNodegroup | Owner::KarpenterNodePool => {
            let aws = cloud.aws.as_ref()?;
            let (region, eks_cluster) = (aws.region.clone(), named(&aws.eks_cluster));
            if owner == Owner::EksNodegroup {
                ManagedGroup::EksNodegroup {
                    region,
                    eks_cluster,
                    nodegroup: name,
                }
            } else {
                ManagedGroup::KarpenterNodePool {
                    region,
                    eks_cluster,
                    node_pool: name,
                }
            }
        }
        Owner::GkeNodePool => {
            let gcp = cloud.gcp.as_ref()?;
            ManagedGroup::GkeNodePool {
                project: gcp.project.clone(),
                location: gcp.location()?.to_string(),
                gke_cluster: named(&gcp.gke_cluster),
                node_pool: name,
            }
        }
        Owner::AksAgentPool => {
            let az = cloud.azure.as_ref()?;
            ManagedGroup::AksAgentPool {
                subscription_id: az.subscription_id.clone(),
                resource_group: az.resource_group.clone(),
                aks_cluster: named(&az.aks_cluster),
                agent_pool: name,
            }
        }
    })
}

fn group_ref(c: &Cluster, g: &GroupSpec) -> Option<GroupRef> {
    let cloud = &c.spec.cloud;
    if g.owner() != Owner::SelfManaged {
        return managed_group(c, g).map(GroupRef::Managed);
    }
    if let Some(aws) = &cloud.aws {
        return Some(GroupRef::Aws {
            region: aws.region.clone(),
            auto_scaling_group: g.auto_scaling_group.clone()?,
        });
    }
    if let Some(gcp) = &cloud.gcp {
        // Neither zone nor region: a group where the cluster is, regional in its region or
        // zonal in its zone.
        let (zone, region) = match (&g.zone, &g.region) {
            (None, None) => (gcp.zone.clone(), gcp.region.clone()),
            (z, r) => (z.clone(), r.clone()),
        };
        return Some(GroupRef::Gcp {
            project: gcp.project.clone(),
            instance_group_manager: g.instance_group_manager.clone()?,
            zone,
            region,
        });
    }
    let az = cloud.azure.as_ref()?;
    Some(GroupRef::Azure {
        subscription_id: az.subscription_id.clone(),
        resource_group: g
            .resource_group
            .clone()
            .unwrap_or_else(|| az.resource_group.clone()),
        scale_set: g.scale_set.clone()?,
    })
}

/// Why `channel@version` has no image for a pool, in the words validation and the agent use.
pub fn describe_miss(
    channel: &str,
    version: &str,
    cloud: Cloud,
    miss: &super::model::ImageMiss,
) -> String {
    use super::model::ImageMiss;
    match miss {
        ImageMiss::Cloud => format!("{channel}@{version} has no {cloud} image"),
        ImageMiss::Region { region, known } => format!(
            "{channel}@{version} has no AMI for region {region} (its aws images are for {}); AMI IDs are regional",
            known.join(", ")
        ),
        ImageMiss::Arch { region, arch } if region.is_empty() => {
            format!("{channel}@{version} has no {cloud} image for arch {arch}")
        }
        ImageMiss::Arch { region, arch } => {
            format!("{channel}@{version} has no AMI for region {region} and arch {arch}")
        }
        ImageMiss::Form { owner, what } => {
            format!("{channel}@{version} has no image for a pool of owner {owner}: it needs {what}")
        }
    }
}

impl Fleet {
    /// The desired state of cluster `name` at this fleet revision.
    pub fn resolve_cluster(&self, name: &str) -> Result<DesiredCluster, ResolveError> {
        let invalid = |why: String| ResolveError::Invalid {
            cluster: name.to_string(),
            why,
        };
        let Some(c) = self.clusters.get(name) else {
            return Err(ResolveError::UnknownCluster {
                name: name.to_string(),
                suggestion: super::diagnostics::did_you_mean(
                    name,
                    self.clusters.keys().map(String::as_str),
                )
                .map(str::to_string),
            });
        };
        let wave_index = *self
            .wave_of
            .get(name)
            .ok_or_else(|| invalid("belongs to no wave".into()))?;
        let wave = &self.spec.waves[wave_index];
        let cloud: Cloud = c
            .spec
            .cloud_kind()
            .ok_or_else(|| invalid("spec.cloud must name exactly one cloud".into()))?;
        let cluster_mode = combine_modes(&[self.spec.mode, c.spec.mode]);
        let mut pools = Vec::with_capacity(c.spec.pools.len());
        for p in &c.spec.pools {
            let version = wave.images.get(&p.channel).ok_or_else(|| {
                invalid(format!(
                    "channel `{}` is not pinned in wave `{}`",
                    p.channel, wave.name
                ))
            })?;
            let channel = self.spec.images.get(&p.channel);
            let images = channel
                .and_then(|ch| ch.versions.get(version))
                .ok_or_else(|| invalid(format!("no version {}@{version}", p.channel)))?;
            let arch = p.arch.unwrap_or_default();
            let region = c.spec.region();
            let miss = |miss| invalid(describe_miss(&p.channel, version, cloud, &miss));
            let owner_image = images
                .owner_image(p.group.owner(), region, arch)
                .transpose()
                .map_err(miss)?;
            let image = match &owner_image {
                Some(o) => o.as_image(),
                None => images
                    .resolve(cloud, region, arch)
                    .map_err(miss)?
                    .to_string(),
            };
            let group = group_ref(c, &p.group).ok_or_else(|| {
                invalid(format!("pool `{}`: group does not match {cloud}", p.name))
            })?;
            let mut policy = EffectivePolicy::default();
            merge_policy(&mut policy, &self.spec.rollout);
            merge_policy(&mut policy, &c.spec.rollout);
            merge_policy(&mut policy, &p.rollout);
            // Only EKS, GKE and AKS pools are replaced by `managedUpdate`: a fleet-wide value
            // does not reach self-managed and Karpenter pools, and the default is `service`.
            policy.managed_update = p
                .group
                .owner()
                .takes_managed_update()
                .then(|| policy.managed_update.unwrap_or_default());
            // Fleet gates first, then the cluster's, then the pool's; a name listed at two
            // levels is checked once.
            let mut gates: Vec<ResolvedGate> = Vec::new();
            for g in self.spec.gates.iter().chain(&c.spec.gates).chain(&p.gates) {
                if gates.iter().any(|x| &x.name == g) {
                    continue;
                }
                let gate = self
                    .gates
                    .get(g)
                    .and_then(resolve_gate)
                    .ok_or_else(|| invalid(format!("gate `{g}` is not declared")))?;
                gates.push(gate);
            }
            pools.push(DesiredPool {
                cluster: name.to_string(),
                name: p.name.clone(),
                channel: p.channel.clone(),
                version: version.clone(),
                image,
                owner_image,
                arch,
                kubelet: images.kubernetes.clone(),
                released: images.released,
                max_age: channel.and_then(|ch| ch.max_age),
                group,
                node_selector: p.node_selector.clone(),
                policy,
                gates,
                mode: combine_modes(&[self.spec.mode, c.spec.mode, p.mode]),
            });
        }
        Ok(DesiredCluster {
            name: name.to_string(),
            labels: c.metadata.labels.clone(),
            cloud,
            wave: wave.name.clone(),
            wave_index,
            mode: cluster_mode,
            kubernetes: c.spec.kubernetes.clone(),
            pools,
        })
    }

    /// Every cluster resolved, in name order.
    pub fn resolve_all(&self) -> Result<Vec<DesiredCluster>, ResolveError> {
        self.clusters
            .keys()
            .map(|n| self.resolve_cluster(n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Mode::*;

    #[test]
    fn ignore_above_wins_otherwise_the_most_specific() {
        assert_eq!(combine_modes(&[]), Reconcile);
        assert_eq!(combine_modes(&[None, None, None]), Reconcile);
        assert_eq!(
            combine_modes(&[Some(ReadOnly), None, Some(Reconcile)]),
            Reconcile
        );
        assert_eq!(combine_modes(&[Some(ReadOnly), None, None]), ReadOnly);
        assert_eq!(
            combine_modes(&[Some(Ignore), Some(Reconcile), Some(Reconcile)]),
            Ignore
        );
        assert_eq!(
            combine_modes(&[None, Some(Ignore), Some(Reconcile)]),
            Ignore
        );
        assert_eq!(
            combine_modes(&[Some(Reconcile), None, Some(Ignore)]),
            Ignore
        );
    }

    #[test]
    fn policies_merge_field_by_field() {
        use crate::fleet::model::DrainOverride;
        use crate::fleet::resolved::{BatchSize, OnDrainTimeout};
        let mut eff = EffectivePolicy::default();
        merge_policy(
            &mut eff,
            &RolloutPolicy {
                batch: Some(BatchSize::Count(2)),
                drain: Some(DrainOverride {
                    timeout: Some(GoDuration::from_secs(600)),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        merge_policy(
            &mut eff,
            &RolloutPolicy {
                drain: Some(DrainOverride {
                    on_timeout: Some(OnDrainTimeout::Force),
                    ..Default::default()
                }),
                windows: Some(vec![]),
                ..Default::default()
            },
        );
        assert_eq!(eff.batch, BatchSize::Count(2));
        assert_eq!(eff.drain.timeout, GoDuration::from_secs(600));
        assert_eq!(eff.drain.on_timeout, OnDrainTimeout::Force);
        assert!(eff.drain.delete_empty_dir_data);
        assert_eq!(eff.percent, 100);
        assert!(eff.windows.is_empty());
    }
}
