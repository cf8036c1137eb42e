//! An AWS cluster's pools as their owners list them, for `rota clusters import`: the EKS
//! cluster's managed node groups (`ListNodegroups`, `DescribeNodegroup`) and the
//! self-managed Auto Scaling groups tagged `kubernetes.io/cluster/<name>`
//! (`DescribeAutoScalingGroups` filtered by that tag key), read-only.
//!
//! An Auto Scaling group that EKS made for a node group (tagged `eks:nodegroup-name`) is
//! the node group's, not a pool of its own: it is left out. A self-managed group's node
//! labels are read from the tags cluster-autoscaler reads them from
//! (`k8s.io/cluster-autoscaler/node-template/label/<key>`), else from eksctl's
//! `alpha.eksctl.io/nodegroup-name` tag (eksctl labels an unmanaged node group's nodes with
//! it); a group with neither is listed with no labels (written commented out, see
//! `rota_core::onboard`).
//!
//! Karpenter NodePools live in the cluster's Kubernetes API, not in AWS's: `--karpenter`
//! lists them through `kube::karpenter_import`.

use std::collections::BTreeMap;

use aws_sdk_autoscaling::types::Filter;

use super::eks::{AwsEksPools, EksClients, NodegroupTemplate, template_of};
use super::errors::from_sdk;
use rota_core::cloud::managed::EKS_NODEGROUP_LABEL;
use rota_core::cloud::{CloudError, CloudErrorKind};
use rota_core::onboard::FoundPool;

/// The tag that marks an instance or group as a cluster's (`kubernetes.io/cluster/<name>`).
pub const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";
/// The tag EKS puts on the Auto Scaling group of a managed node group.
pub const EKS_NODEGROUP_TAG: &str = "eks:nodegroup-name";
/// cluster-autoscaler's tag prefix for the labels a group's nodes carry.
pub const NODE_LABEL_TAG_PREFIX: &str = "k8s.io/cluster-autoscaler/node-template/label/";
/// The tag eksctl puts on an unmanaged node group's Auto Scaling group; eksctl labels the
/// group's nodes with the same key and value.
pub const EKSCTL_NODEGROUP_KEY: &str = "alpha.eksctl.io/nodegroup-name";

impl AwsEksPools {
    /// The architecture of `ami` as EC2 describes it (`DescribeImages`): `x86_64` or
    /// `arm64`; `None` for another or an image EC2 does not list.
    async fn image_arch(
        &self,
        c: &EksClients,
        ami: &str,
        subject: &str,
    ) -> Result<Option<String>, CloudError> {
        const CALL: &str = "DescribeImages";
        let out = self
            .retry()
            .run(CALL, subject, || async {
                c.ec2
                    .describe_images()
                    .image_ids(ami)
                    .send()
                    .await
                    .map_err(|e| from_sdk(e, CALL, subject))
            })
            .await?;
        Ok(out
            .images()
            .first()
            .and_then(|i| i.architecture())
            .and_then(|a| match a.as_str() {
                a if a.starts_with("arm64") => Some("arm64".to_string()),
                a if a.starts_with("x86_64") => Some("x86_64".to_string()),
                _ => None,
            }))
    }

    /// The architecture of the AMI a launch template version boots; `None` (with why, for
    /// the pool's comment) when it cannot be read: the import goes on, the file says so.
    async fn template_arch(
        &self,
        c: &EksClients,
        t: &NodegroupTemplate,
        subject: &str,
    ) -> (Option<String>, Option<String>) {
        let version = match self.template_version(c, t, &t.version, subject).await {
            Ok(v) => v,
            Err(e) => return (None, Some(format!("architecture not read: {}", e.message))),
        };
        match self.image_arch(c, &version.image, subject).await {
            Ok(Some(a)) => (Some(a), None),
            Ok(None) => (
                None,
                Some(format!(
                    "architecture of {} not known to EC2",
                    version.image
                )),
            ),
            Err(e) => (None, Some(format!("architecture not read: {}", e.message))),
        }
    }

    /// The managed node groups of EKS cluster `cluster` in `region`. `NotFound` when EKS
    /// has no such cluster.
    pub async fn list_nodegroups(
        &self,
        region: &str,
        cluster: &str,
    ) -> Result<Vec<FoundPool>, CloudError> {
        const LIST: &str = "ListNodegroups";
        let subject = format!("aws:{region}/eks/{cluster}");
        let c = self.clients(region);
        let mut names = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = self
                .retry()
                .run(LIST, &subject, || async {
                    c.eks
                        .list_nodegroups()
                        .cluster_name(cluster)
                        .set_next_token(token.clone())
                        .send()
                        .await
                        .map_err(|e| from_sdk(e, LIST, &subject))
                })
                .await?;
            names.extend(out.nodegroups().iter().cloned());
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        let mut pools = Vec::new();
        for name in names {
            let ng = self.nodegroup(&c, cluster, &name, &subject).await?;
            let (how, arch, note) = match template_of(&ng, &subject) {
                Ok(t) => {
                    let (arch, note) = self.template_arch(&c, &t, &subject).await;
                    ("with a launch template", arch, note)
                }
                // rota can pin an AMI only through a launch template (see `eks`): said
                // where the pool is written, before anyone bumps its image.
                Err(_) => (
                    "without a launch template: EKS picks its AMI, rota cannot pin one",
                    // EKS's AMI types name their architecture (`AL2023_ARM_64_STANDARD`).
                    ng.ami_type().map(|t| {
                        if t.as_str().contains("ARM_64") {
                            "arm64"
                        } else {
                            "x86_64"
                        }
                        .to_string()
                    }),
                    None,
                ),
            };
            pools.push(FoundPool {
                name: name.clone(),
                group: vec![("eksNodegroup", name.clone())],
                node_selector: BTreeMap::from([(EKS_NODEGROUP_LABEL.to_string(), name.clone())]),
                arch,
                source: format!(
                    "EKS managed node group {name} of cluster {cluster} in {region} ({how}){}",
                    note.map(|n| format!("; {n}")).unwrap_or_default()
                ),
            });
        }
        Ok(pools)
    }

    /// The self-managed Auto Scaling groups in `region` tagged as cluster `tag_cluster`'s.
    pub async fn list_tagged_groups(
        &self,
        region: &str,
        tag_cluster: &str,
    ) -> Result<Vec<FoundPool>, CloudError> {
        const CALL: &str = "DescribeAutoScalingGroups";
        let tag = format!("{CLUSTER_TAG_PREFIX}{tag_cluster}");
        let subject = format!("aws:{region}/autoscaling/{tag}");
        let c = self.clients(region);
        let mut pools = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = self
                .retry()
                .run(CALL, &subject, || async {
                    c.asg
                        .describe_auto_scaling_groups()
                        .filters(Filter::builder().name("tag-key").values(&tag).build())
                        .set_next_token(token.clone())
                        .send()
                        .await
                        .map_err(|e| from_sdk(e, CALL, &subject))
                })
                .await?;
            for g in out.auto_scaling_groups() {
                let name = g.auto_scaling_group_name().unwrap_or_default().to_string();
                let tags: BTreeMap<&str, &str> = g
                    .tags()
                    .iter()
                    .filter_map(|t| Some((t.key()?, t.value().unwrap_or_default())))
                    .collect();
                // The filter is the server's; the answer is checked all the same (a proxy
                // or an emulator that ignores filters must not import a stranger's group).
                if name.is_empty() || !tags.contains_key(tag.as_str()) {
                    continue;
                }
                if tags.contains_key(EKS_NODEGROUP_TAG) {
                    continue;
                }
                let mut labels: BTreeMap<String, String> = tags
                    .iter()
                    .filter_map(|(k, v)| {
                        let key = k.strip_prefix(NODE_LABEL_TAG_PREFIX)?;
                        Some((key.to_string(), v.to_string()))
                    })
                    .collect();
                let mut from = NODE_LABEL_TAG_PREFIX.to_string() + "* tags";
                if labels.is_empty()
                    && let Some(ng) = tags.get(EKSCTL_NODEGROUP_KEY)
                {
                    // eksctl's unmanaged node groups: the label eksctl gives their nodes.
                    labels.insert(EKSCTL_NODEGROUP_KEY.to_string(), ng.to_string());
                    from =
                        format!("{EKSCTL_NODEGROUP_KEY} tag, which eksctl labels its nodes with");
                }
                let (arch, note) = match super::template::group_template(g) {
                    Ok(t) => {
                        let t = NodegroupTemplate {
                            id: t.id,
                            name: t.name,
                            version: t.version,
                        };
                        self.template_arch(&c, &t, &subject).await
                    }
                    Err(u) => (None, Some(format!("architecture not read: {}", u.0))),
                };
                let mut source = format!("Auto Scaling group {name} in {region}, tagged {tag}");
                if !labels.is_empty() {
                    source.push_str(&format!(" (node labels from its {from})"));
                }
                if let Some(n) = note {
                    source.push_str(&format!("; {n}"));
                }
                pools.push(FoundPool {
                    name: name.clone(),
                    group: vec![("autoScalingGroup", name.clone())],
                    arch,
                    source,
                    node_selector: labels,
                });
            }
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        Ok(pools)
    }

    /// Both: the EKS cluster's node groups (unless `eks_cluster` is `None`, a cluster not
    /// on EKS) and the groups tagged as `tag_cluster`'s.
    pub async fn list_cluster_pools(
        &self,
        region: &str,
        eks_cluster: Option<&str>,
        tag_cluster: &str,
    ) -> Result<Vec<FoundPool>, CloudError> {
        let mut pools = match eks_cluster {
            Some(c) => self.list_nodegroups(region, c).await.map_err(|mut e| {
                if e.kind == CloudErrorKind::NotFound || e.message.contains("ResourceNotFound") {
                    e.message = format!(
                        "{}; for a cluster that is not on EKS, import with --no-eks",
                        e.message
                    );
                }
                e
            })?,
            None => Vec::new(),
        };
        pools.extend(self.list_tagged_groups(region, tag_cluster).await?);
        Ok(pools)
    }
}
