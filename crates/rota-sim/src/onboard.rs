//! `rota clusters import` against the simulated fleet: a simulated cluster's pools as the
//! simulated cloud holds them, in the shape the real inventories give
//! (`rota_core::onboard::FoundPool`).
//!
//! Which groups are the cluster's comes from its scenario, as a real cloud says it with a
//! tag (`kubernetes.io/cluster/<name>`); each group must exist in the simulated cloud, and a
//! managed one is described through its owner's API (EKS `DescribeNodegroup`), as the real
//! import does. Node labels are the ones the simulated nodes register with: the owner's
//! own label for an EKS node group (`eks.amazonaws.com/nodegroup`), the scenario's labels
//! for a self-managed group (a real group states them in cluster-autoscaler's tags).

use std::collections::BTreeMap;

use super::cloud::SimCloud;
use super::scenario::ClusterScenario;
use rota_core::cloud::managed::{EKS_NODEGROUP_LABEL, OwnerPools};
use rota_core::cloud::{CloudError, CloudErrorKind, GroupRef};
use rota_core::fleet::owner::ManagedGroup;
use rota_core::onboard::{FoundCloud, FoundPool};

/// The cloud section and the pools of `cluster`, read from `cloud`. `NotFound` when a
/// group of the cluster is not in the cloud; an owner's error as it comes.
pub async fn cluster_pools(
    cloud: &SimCloud,
    cluster: &ClusterScenario,
) -> Result<(FoundCloud, Vec<FoundPool>), CloudError> {
    let held = cloud.groups();
    let mut pools = Vec::new();
    let mut found_cloud = None;
    for p in &cluster.pools {
        if !held.contains(&p.group) {
            return Err(CloudError::new(
                CloudErrorKind::NotFound,
                "ListGroups",
                &p.group,
                format!("the simulated cloud holds no group for pool {}", p.name),
            ));
        }
        found_cloud.get_or_insert_with(|| cloud_of(&p.group));
        let (group, node_selector, source) = match &p.group {
            GroupRef::Managed(m @ ManagedGroup::EksNodegroup { nodegroup, .. }) => {
                let state = cloud.describe(m).await?;
                (
                    vec![("eksNodegroup", nodegroup.clone())],
                    BTreeMap::from([(EKS_NODEGROUP_LABEL.to_string(), nodegroup.clone())]),
                    format!(
                        "simulated EKS managed node group {nodegroup} of cluster {} ({} nodes \
                         wanted when imported)",
                        m.cluster(),
                        state.desired
                    ),
                )
            }
            GroupRef::Managed(m) => (
                vec![(m.owner().group_key(), m.name().to_string())],
                p.node_selector.clone(),
                format!("simulated {} pool {}", m.owner().service(), m.name()),
            ),
            GroupRef::Aws {
                auto_scaling_group, ..
            } => (
                vec![("autoScalingGroup", auto_scaling_group.clone())],
                p.node_selector.clone(),
                format!("simulated Auto Scaling group {auto_scaling_group}"),
            ),
            GroupRef::Gcp {
                instance_group_manager,
                zone,
                region,
                ..
            } => {
                let mut g = vec![("instanceGroupManager", instance_group_manager.clone())];
                if let Some(z) = zone {
                    g.push(("zone", z.clone()));
                }
                if let Some(r) = region {
                    g.push(("region", r.clone()));
                }
                (
                    g,
                    p.node_selector.clone(),
                    format!("simulated managed instance group {instance_group_manager}"),
                )
            }
            GroupRef::Azure {
                resource_group,
                scale_set,
                ..
            } => (
                vec![
                    ("scaleSet", scale_set.clone()),
                    ("resourceGroup", resource_group.clone()),
                ],
                p.node_selector.clone(),
                format!("simulated scale set {scale_set}"),
            ),
        };
        pools.push(FoundPool {
            // The simulated images carry no architecture the cloud reports: the pool's
            // `arch` is left to its default.
            arch: None,
            // The sim names its groups after the pools; a real owner's name is what a
            // person recognises, so the group's name is used here too.
            name: group[0].1.clone(),
            group,
            node_selector,
            source,
        });
    }
    let cloud_section = found_cloud.unwrap_or(FoundCloud {
        cloud: match cluster.cloud {
            rota_core::cloud::Cloud::Aws => "aws",
            rota_core::cloud::Cloud::Gcp => "gcp",
            rota_core::cloud::Cloud::Azure => "azure",
        },
        fields: Vec::new(),
    });
    Ok((cloud_section, pools))
}

/// The Cluster's `cloud` as a group of it names it.
fn cloud_of(group: &GroupRef) -> FoundCloud {
    match group {
        GroupRef::Aws { region, .. } => FoundCloud {
            cloud: "aws",
            fields: vec![("region", region.clone())],
        },
        GroupRef::Gcp {
            project,
            zone,
            region,
            ..
        } => {
            let mut fields = vec![("project", project.clone())];
            if let Some(r) = region {
                fields.push(("region", r.clone()));
            } else if let Some(z) = zone {
                fields.push(("zone", z.clone()));
            }
            FoundCloud {
                cloud: "gcp",
                fields,
            }
        }
        GroupRef::Azure {
            subscription_id,
            resource_group,
            ..
        } => FoundCloud {
            cloud: "azure",
            fields: vec![
                ("subscriptionId", subscription_id.clone()),
                ("resourceGroup", resource_group.clone()),
            ],
        },
        GroupRef::Managed(m) => match m {
            ManagedGroup::EksNodegroup {
                region,
                eks_cluster,
                ..
            }
            | ManagedGroup::KarpenterNodePool {
                region,
                eks_cluster,
                ..
            } => FoundCloud {
                cloud: "aws",
                fields: vec![
                    ("region", region.clone()),
                    ("eksCluster", eks_cluster.clone()),
                ],
            },
            ManagedGroup::GkeNodePool {
                project,
                location,
                gke_cluster,
                ..
            } => FoundCloud {
                cloud: "gcp",
                fields: vec![
                    ("project", project.clone()),
                    ("region", location.clone()),
                    ("gkeCluster", gke_cluster.clone()),
                ],
            },
            ManagedGroup::AksAgentPool {
                subscription_id,
                resource_group,
                aks_cluster,
                ..
            } => FoundCloud {
                cloud: "azure",
                fields: vec![
                    ("subscriptionId", subscription_id.clone()),
                    ("resourceGroup", resource_group.clone()),
                    ("aksCluster", aks_cluster.clone()),
                ],
            },
        },
    }
}
