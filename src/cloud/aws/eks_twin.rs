//! `managedUpdate: blueGreen` on EKS managed node groups: the twin node group, the members
//! of a node group, its size, one drained node's removal and the old node group's deletion,
//! as [`AwsEksPools`]' blue-green calls of [`rota_core::cloud::managed::OwnerPools`].
//!
//! | call | EKS, EC2 and Auto Scaling |
//! |---|---|
//! | `create_twin` | `DescribeNodegroup` of the twin's name (rota's own twin already there answers `Ok`), `DescribeNodegroup` of the old one, a version of its launch template with the new AMI (`CreateLaunchTemplateVersion`, described `rota: <twin name>`, reused on a retry), `CreateNodegroup` |
//! | `members` | `DescribeNodegroup`, `DescribeLaunchTemplateVersions` of its version (the AMI), and its Auto Scaling group's instances (`DescribeAutoScalingGroups`, `DescribeInstances`) |
//! | `set_size` | `DescribeNodegroup`, `UpdateNodegroupConfig` with `scalingConfig` when it differs |
//! | `remove_node` | `DescribeNodegroup` (its ASG), `TerminateInstanceInAutoScalingGroup` with decrement |
//! | `delete_pool` | `DescribeNodegroup`, `DeleteNodegroup` unless already deleting or gone |
//! | `twins_of` | `ListNodegroups` of the cluster (every page), `DescribeNodegroup` of each other node group (its tags), the members of each tagged `rota.dev/twin-of: <pool>` |
//!
//! The twin is the old node group's shape: its IAM role, subnets, instance types, capacity
//! type, AMI type, Kubernetes labels, taints, `updateConfig` and tags (plus
//! [`TWIN_TAG`] naming the old node group), and its launch template (the same template, a new
//! version differing in the AMI only: disk size, security groups and user data come with
//! it). EKS takes neither `diskSize` nor `remoteAccess` with a launch template, and neither
//! `version` nor `releaseVersion` with a custom AMI, so none is sent. `CreateNodegroup`
//! carries the twin's name as its `clientRequestToken`: a retry after a lost answer creates
//! nothing new.

use std::collections::HashMap;

use aws_sdk_eks::types::{
    LaunchTemplateSpecification, Nodegroup, NodegroupScalingConfig, NodegroupStatus,
};

use super::eks::{AwsEksPools, eks_target, template_of};
use super::errors::from_sdk;
use rota_core::cloud::managed::{
    MaxUnavailable, OwnerPoolMembers, PoolOs, PoolStatus, TwinRequest, UpdateRequest, renamed,
};
use rota_core::cloud::{CloudError, CloudErrorKind, GroupRef, NodeGroups};
use rota_core::fleet::owner::ManagedGroup;

/// The tag on a twin node group naming the node group it was made from.
pub const TWIN_TAG: &str = "rota.dev/twin-of";

/// A bound on `ListNodegroups` pages (100 node groups each): EKS allows 450 node groups a
/// cluster, so a list that goes on past this is not EKS's.
const MAX_NODEGROUP_PAGES: usize = 20;

/// A node group name as EKS takes one: 1 to 63 letters, digits, `-` and `_`, starting with
/// a letter or digit.
fn nodegroup_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && n.starts_with(|c: char| c.is_ascii_alphanumeric())
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A node group's status in rota's words (EKS's failures all `Failed`, `health` says why).
fn status_of(ng: &Nodegroup) -> PoolStatus {
    match ng.status() {
        Some(NodegroupStatus::Creating) => PoolStatus::Creating,
        Some(NodegroupStatus::Updating) => PoolStatus::Updating,
        Some(NodegroupStatus::Deleting) => PoolStatus::Deleting,
        Some(
            NodegroupStatus::CreateFailed
            | NodegroupStatus::DeleteFailed
            | NodegroupStatus::Degraded,
        ) => PoolStatus::Failed,
        _ => PoolStatus::Active,
    }
}

/// The node group's tag naming what it is a twin of.
fn twin_of(ng: &Nodegroup) -> Option<String> {
    ng.tags().and_then(|t| t.get(TWIN_TAG)).cloned()
}

fn scaling(ng: &Nodegroup) -> (u32, u32, u32) {
    let s = ng.scaling_config();
    let n = |v: Option<i32>| v.unwrap_or(0).max(0) as u32;
    (
        n(s.and_then(|s| s.min_size())),
        n(s.and_then(|s| s.desired_size())),
        n(s.and_then(|s| s.max_size())),
    )
}

impl AwsEksPools {
    /// `DescribeNodegroup`, `None` when EKS has no such node group.
    async fn nodegroup_if_any(
        &self,
        pool: &ManagedGroup,
        call: &'static str,
    ) -> Result<Option<Nodegroup>, CloudError> {
        let (region, cluster, name) = eks_target(pool, call)?;
        let c = self.clients(region);
        match self.nodegroup(&c, cluster, name, &pool.to_string()).await {
            Ok(ng) => Ok(Some(ng)),
            Err(e) if e.kind == CloudErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(crate) async fn twin_create(&self, req: &TwinRequest) -> Result<(), CloudError> {
        const CALL: &str = "CreateNodegroup";
        let (region, cluster, from) = eks_target(&req.from, CALL)?;
        let (_, _, twin) = eks_target(&req.twin, CALL)?;
        let subject = req.twin.to_string();
        if let Some(ng) = self.nodegroup_if_any(&req.twin, CALL).await? {
            return if twin_of(&ng).as_deref() == Some(from) {
                Ok(())
            } else {
                Err(CloudError::about(
                    CloudErrorKind::Invalid,
                    CALL,
                    &subject,
                    format!(
                        "ResourceInUseException: a node group named {twin} exists and is not rota's \
                         twin of {from} (no {TWIN_TAG}: {from} tag); rota creates no twin over it"
                    ),
                ))
            };
        }
        let c = self.clients(region);
        let old = self
            .nodegroup(&c, cluster, from, &req.from.to_string())
            .await?;
        let t = template_of(&old, &req.from.to_string())?;
        let current = self.template_version(&c, &t, &t.version, &subject).await?;
        // The twin's launch template version: the old one's with the new AMI, described by
        // the twin's name so that a retry finds it instead of making another.
        let version_req = UpdateRequest {
            image: req.image.clone(),
            max_unavailable: MaxUnavailable::Count(1),
            token: twin.to_string(),
            drain_timeout_minutes: None,
            node_soak_minutes: None,
            drain_first: false,
            force: false,
        };
        let number = self
            .version_for(&c, &t, &current, &version_req, &subject)
            .await?;
        let create = twin_request(&old, req, number, &t);
        self.retry()
            .run(CALL, &subject, || async {
                create
                    .clone()
                    .send_with(&c.eks)
                    .await
                    .map_err(|e| from_sdk(e, CALL, &subject))
            })
            .await?;
        Ok(())
    }

    pub(crate) async fn twin_members(
        &self,
        pool: &ManagedGroup,
    ) -> Result<Option<OwnerPoolMembers>, CloudError> {
        let Some(ng) = self.nodegroup_if_any(pool, "DescribeNodegroup").await? else {
            return Ok(None);
        };
        self.members_of(pool, &ng).await.map(Some)
    }

    /// The members of `pool` from `ng`, its `DescribeNodegroup` answer: the AMI of its launch
    /// template version and its Auto Scaling group's instances.
    async fn members_of(
        &self,
        pool: &ManagedGroup,
        ng: &Nodegroup,
    ) -> Result<OwnerPoolMembers, CloudError> {
        let (region, _, _) = eks_target(pool, "DescribeNodegroup")?;
        let subject = pool.to_string();
        let c = self.clients(region);
        let image = match template_of(ng, &subject) {
            Ok(t) => {
                self.template_version(&c, &t, &t.version, &subject)
                    .await?
                    .image
            }
            Err(_) => String::new(),
        };
        let instances = match asg_of(ng) {
            Some(asg) => {
                let group = GroupRef::Aws {
                    region: region.to_string(),
                    auto_scaling_group: asg,
                };
                match self.asgs.describe(&group).await {
                    Ok(g) => g.instances,
                    // Not made yet (a node group still CREATING) or gone with it.
                    Err(e) if e.kind == CloudErrorKind::NotFound => Vec::new(),
                    Err(e) => return Err(e),
                }
            }
            None => Vec::new(),
        };
        let (_, desired, max) = scaling(ng);
        Ok(OwnerPoolMembers {
            pool: pool.clone(),
            status: status_of(ng),
            image,
            desired,
            max,
            instances,
            issues: ng
                .health()
                .map(|h| {
                    h.issues()
                        .iter()
                        .map(|i| {
                            format!(
                                "{}: {}",
                                i.code().map(|c| c.as_str()).unwrap_or("Issue"),
                                i.message().unwrap_or_default()
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
            twin_of: twin_of(ng),
            // EKS names node groups alike on every OS.
            os: PoolOs::Linux,
        })
    }

    /// rota's twins of `pool`: the node groups of its cluster tagged `rota.dev/twin-of:
    /// <pool>` (`ListNodegroups`, every page, then `DescribeNodegroup` of each other node
    /// group for its tags: the list names only), whatever their names.
    pub(crate) async fn twin_list(
        &self,
        pool: &ManagedGroup,
    ) -> Result<Vec<OwnerPoolMembers>, CloudError> {
        const CALL: &str = "ListNodegroups";
        let (region, cluster, name) = eks_target(pool, CALL)?;
        let subject = pool.to_string();
        let c = self.clients(region);
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_NODEGROUP_PAGES {
            let out = self
                .retry()
                .run(CALL, &subject, || async {
                    c.eks
                        .list_nodegroups()
                        .cluster_name(cluster)
                        .max_results(100)
                        .set_next_token(token.clone())
                        .send()
                        .await
                        .map_err(|e| from_sdk(e, CALL, &subject))
                })
                .await?;
            for n in out.nodegroups() {
                if !nodegroup_name(n) {
                    return Err(CloudError::about(
                        CloudErrorKind::Invalid,
                        CALL,
                        &subject,
                        format!(
                            "nodegroups[] holds {:?}, which is not a node group name (1 to 63 \
                             letters, digits, - and _)",
                            n.chars().take(80).collect::<String>()
                        ),
                    ));
                }
                names.push(n.clone());
            }
            token = out
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                let mut out = Vec::new();
                for n in names.iter().filter(|n| *n != name) {
                    let twin = renamed(pool, n);
                    // Gone between the list and its describe: not a twin any more.
                    let Some(ng) = self.nodegroup_if_any(&twin, "DescribeNodegroup").await? else {
                        continue;
                    };
                    if twin_of(&ng).as_deref() == Some(name) {
                        out.push(self.members_of(&twin, &ng).await?);
                    }
                }
                return Ok(out);
            }
        }
        Err(CloudError::about(
            CloudErrorKind::Invalid,
            CALL,
            &subject,
            format!("more than {MAX_NODEGROUP_PAGES} pages of node groups: nextToken does not end"),
        ))
    }

    pub(crate) async fn twin_set_size(
        &self,
        pool: &ManagedGroup,
        desired: u32,
        max: u32,
    ) -> Result<(), CloudError> {
        const CALL: &str = "UpdateNodegroupConfig";
        let (region, cluster, name) = eks_target(pool, CALL)?;
        let subject = pool.to_string();
        let c = self.clients(region);
        let ng = self.nodegroup(&c, cluster, name, &subject).await?;
        let (min, have_desired, have_max) = scaling(&ng);
        // EKS wants min <= desired <= max, and a max of at least 1.
        let max = max.max(desired).max(1);
        let min = min.min(desired);
        if (have_desired, have_max) == (desired, max) && min <= desired {
            return Ok(());
        }
        let cfg = NodegroupScalingConfig::builder()
            .min_size(min as i32)
            .desired_size(desired as i32)
            .max_size(max as i32)
            .build();
        self.retry()
            .run(CALL, &subject, || async {
                c.eks
                    .update_nodegroup_config()
                    .cluster_name(cluster)
                    .nodegroup_name(name)
                    .scaling_config(cfg.clone())
                    .send()
                    .await
                    .map_err(|e| from_sdk(e, CALL, &subject))
            })
            .await?;
        Ok(())
    }

    pub(crate) async fn twin_remove_node(
        &self,
        pool: &ManagedGroup,
        instance_id: &str,
    ) -> Result<(), CloudError> {
        const CALL: &str = "TerminateInstanceInAutoScalingGroup";
        let (region, _, _) = eks_target(pool, CALL)?;
        let Some(ng) = self.nodegroup_if_any(pool, "DescribeNodegroup").await? else {
            return Ok(());
        };
        let Some(asg) = asg_of(&ng) else {
            return Err(CloudError::about(
                CloudErrorKind::Invalid,
                CALL,
                &pool.to_string(),
                "EKS names no Auto Scaling group for the node group",
            ));
        };
        let group = GroupRef::Aws {
            region: region.to_string(),
            auto_scaling_group: asg,
        };
        match self.asgs.terminate(&group, instance_id, true).await {
            Err(e) if e.kind == CloudErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    pub(crate) async fn twin_delete(&self, pool: &ManagedGroup) -> Result<(), CloudError> {
        const CALL: &str = "DeleteNodegroup";
        let (region, cluster, name) = eks_target(pool, CALL)?;
        let Some(ng) = self.nodegroup_if_any(pool, CALL).await? else {
            return Ok(());
        };
        if status_of(&ng) == PoolStatus::Deleting {
            return Ok(());
        }
        let subject = pool.to_string();
        let c = self.clients(region);
        let out = self
            .retry()
            .run(CALL, &subject, || async {
                c.eks
                    .delete_nodegroup()
                    .cluster_name(cluster)
                    .nodegroup_name(name)
                    .send()
                    .await
                    .map_err(|e| from_sdk(e, CALL, &subject))
            })
            .await;
        match out {
            Err(e) if e.kind == CloudErrorKind::NotFound => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

/// The node group's Auto Scaling group (EKS makes one per node group).
fn asg_of(ng: &Nodegroup) -> Option<String> {
    ng.resources()?
        .auto_scaling_groups()
        .first()?
        .name()
        .map(str::to_string)
}

/// What `CreateNodegroup` is sent for the twin of `old` (see the module header).
#[derive(Clone, Debug)]
pub(crate) struct TwinCreate {
    cluster: String,
    name: String,
    node_role: Option<String>,
    subnets: Vec<String>,
    instance_types: Vec<String>,
    capacity_type: Option<aws_sdk_eks::types::CapacityTypes>,
    ami_type: Option<aws_sdk_eks::types::AmiTypes>,
    labels: Option<HashMap<String, String>>,
    taints: Vec<aws_sdk_eks::types::Taint>,
    update_config: Option<aws_sdk_eks::types::NodegroupUpdateConfig>,
    tags: HashMap<String, String>,
    scaling: NodegroupScalingConfig,
    launch_template: LaunchTemplateSpecification,
}

pub(crate) fn twin_request(
    old: &Nodegroup,
    req: &TwinRequest,
    version: i64,
    t: &super::eks::NodegroupTemplate,
) -> TwinCreate {
    let (cluster, from, name) = match (&req.from, &req.twin) {
        (
            ManagedGroup::EksNodegroup {
                eks_cluster,
                nodegroup,
                ..
            },
            twin,
        ) => (
            eks_cluster.clone(),
            nodegroup.clone(),
            twin.name().to_string(),
        ),
        _ => (String::new(), String::new(), req.twin.name().to_string()),
    };
    let mut tags = old.tags().cloned().unwrap_or_default();
    tags.insert(TWIN_TAG.to_string(), from);
    TwinCreate {
        cluster,
        name,
        node_role: old.node_role().map(str::to_string),
        subnets: old.subnets().to_vec(),
        instance_types: old.instance_types().to_vec(),
        capacity_type: old.capacity_type().cloned(),
        ami_type: old.ami_type().cloned(),
        labels: old.labels().cloned(),
        taints: old.taints().to_vec(),
        update_config: old.update_config().cloned(),
        tags,
        scaling: NodegroupScalingConfig::builder()
            .min_size(0)
            .desired_size(req.desired as i32)
            .max_size(req.max.max(req.desired).max(1) as i32)
            .build(),
        launch_template: LaunchTemplateSpecification::builder()
            .set_id(t.id.clone())
            .set_name(if t.id.is_some() { None } else { t.name.clone() })
            .version(version.to_string())
            .build(),
    }
}

impl TwinCreate {
    async fn send_with(
        self,
        eks: &aws_sdk_eks::Client,
    ) -> Result<
        aws_sdk_eks::operation::create_nodegroup::CreateNodegroupOutput,
        aws_sdk_eks::error::SdkError<
            aws_sdk_eks::operation::create_nodegroup::CreateNodegroupError,
        >,
    > {
        let list = |v: Vec<String>| (!v.is_empty()).then_some(v);
        eks.create_nodegroup()
            .cluster_name(&self.cluster)
            .nodegroup_name(&self.name)
            .set_node_role(self.node_role)
            .set_subnets(list(self.subnets))
            .set_instance_types(list(self.instance_types))
            .set_capacity_type(self.capacity_type)
            .set_ami_type(self.ami_type)
            .set_labels(self.labels)
            .set_taints((!self.taints.is_empty()).then_some(self.taints))
            .set_update_config(self.update_config)
            .set_tags(Some(self.tags))
            .scaling_config(self.scaling)
            .launch_template(self.launch_template)
            .client_request_token(&self.name)
            .send()
            .await
    }
}
