//! EKS managed node groups: [`OwnerPools`] on the EKS API, the owner's own update only.
//!
//! Calls, per operation (each wrapped in the shared [`RetryPolicy`]):
//! - `describe`: `DescribeNodegroup` (size, `updateConfig`, the node group's launch template
//!   and version), `DescribeLaunchTemplateVersions` of that version (its AMI, resolved if an
//!   SSM alias), `ListUpdates` of the node group and `DescribeUpdate` of each update not
//!   already seen finished (a finished update never changes, so it is kept and not asked
//!   again), the newest `VersionUpdate` by `createdAt` being the pool's update.
//! - `start_update`: a new version of the node group's own launch template
//!   (`CreateLaunchTemplateVersion` from the version the node group runs, `ImageId` only,
//!   described `rota: <token>`), `UpdateNodegroupConfig` with `updateConfig`
//!   (`maxUnavailable` or `maxUnavailablePercentage`), then `UpdateNodegroupVersion` with
//!   that launch template version, the token as `clientRequestToken` and `force` when the
//!   pool's `drain.onTimeout` is `force`.
//!
//! EKS's `Update` does not echo the `clientRequestToken`, yet a restarted agent must know
//! whether the update it finds is the one it recorded. The launch template version carries
//! the token in its description, and a version update names the version in its params
//! (`LaunchTemplateVersion`): the token is read back from there. The same description makes
//! a retried start idempotent: when the template's newest version already says
//! `rota: <token>` with the AMI asked, it is reused rather than a second one made.
//! (Should EKS ever answer a version update without its `LaunchTemplateVersion` param, the
//! token stays unknown and the planner sends its start again with the same token, which EKS
//! answers with the update that token started: never a second update, but the pool would
//! not see its update end. Not seen in EKS's documented answers; a loose end.)
//!
//! Never written: the launch template of the node group's Auto Scaling group (EKS's own
//! copy; a write there puts the node group in `DEGRADED`) or the group itself.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use aws_config::{Region, SdkConfig};
use aws_sdk_eks::types::{
    LaunchTemplateSpecification, Nodegroup, NodegroupUpdateConfig, NodegroupUpdateStrategies,
    Update, UpdateParamType, UpdateType,
};

use super::errors::from_sdk;
use crate::cloud::lazy_owner::OwnerFacts;
use crate::cloud::retry::RetryPolicy;
use rota_core::cloud::managed::{
    MaxUnavailable, OwnerCapabilities, OwnerPoolMembers, OwnerPoolState, OwnerPools, OwnerUpdate,
    TwinRequest, UpdateRequest, UpdateStatus,
};
use rota_core::cloud::{CloudError, CloudErrorKind};
use rota_core::fleet::owner::{ManagedGroup, Owner};

/// The prefix of the description of every launch template version rota makes.
pub const VERSION_DESCRIPTION_PREFIX: &str = "rota: ";

/// At most this many of a node group's updates are read per describe (EKS keeps every
/// update; the newest are what matters, and a node group with a longer history than this
/// is read in pages, the finished ones from the cache).
const MAX_UPDATES: usize = 500;

/// The EKS and EC2 clients of one region.
#[derive(Clone)]
pub(crate) struct EksClients {
    pub(crate) eks: aws_sdk_eks::Client,
    pub(crate) ec2: aws_sdk_ec2::Client,
    /// Only `rota clusters import` uses it (the groups tagged as the cluster's).
    pub(crate) asg: aws_sdk_autoscaling::Client,
}

/// [`OwnerPools`] for EKS managed node groups, in any region.
pub struct AwsEksPools {
    sdk: SdkConfig,
    endpoint_url: Option<String>,
    /// The EKS endpoint alone, where it differs from `endpoint_url` (tests: an EKS double
    /// beside moto's EC2).
    eks_endpoint_url: Option<String>,
    retry: RetryPolicy,
    clients: Mutex<HashMap<String, EksClients>>,
    /// Finished updates by ID: EKS never changes them again.
    finished: Mutex<HashMap<String, Update>>,
    /// The node groups' own Auto Scaling groups, for `blueGreen`'s members and scale-in
    /// (`eks_twin`): read, and an instance terminated with decrement; never their template.
    pub(crate) asgs: super::AwsNodeGroups,
}

/// A node group's launch template as EKS names it: ID (or name) and version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodegroupTemplate {
    pub(crate) id: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) version: String,
}

/// One launch template version: its AMI and its description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TemplateVersion {
    number: i64,
    pub(crate) image: String,
    description: String,
}

impl AwsEksPools {
    /// The owner on the standard credential chain (as [`super::AwsNodeGroups::from_env`]).
    pub async fn from_env(endpoint_url: Option<String>, retry: RetryPolicy) -> AwsEksPools {
        AwsEksPools::from_sdk_config(super::load_sdk_config().await, endpoint_url, retry)
    }

    /// The owner on an SDK configuration built by the caller; its retries are turned off
    /// (rota's policy applies).
    pub fn from_sdk_config(
        sdk: SdkConfig,
        endpoint_url: Option<String>,
        retry: RetryPolicy,
    ) -> AwsEksPools {
        let asgs =
            super::AwsNodeGroups::from_sdk_config(sdk.clone(), endpoint_url.clone(), retry.clone());
        AwsEksPools {
            sdk: super::without_sdk_retries(sdk),
            endpoint_url,
            eks_endpoint_url: None,
            retry,
            clients: Mutex::new(HashMap::new()),
            finished: Mutex::new(HashMap::new()),
            asgs,
        }
    }

    /// The same owner with EKS calls sent to `url` (EC2 and Auto Scaling keep the endpoint
    /// they had): an EKS double beside moto in tests, an EKS VPC endpoint of its own.
    pub fn with_eks_endpoint(mut self, url: impl Into<String>) -> AwsEksPools {
        self.eks_endpoint_url = Some(url.into());
        self.clients.lock().unwrap().clear();
        self
    }

    pub(crate) fn clients(&self, region: &str) -> EksClients {
        let mut clients = self.clients.lock().unwrap();
        clients
            .entry(region.to_string())
            .or_insert_with(|| {
                let mut eks = aws_sdk_eks::config::Builder::from(&self.sdk)
                    .region(Region::new(region.to_string()));
                let mut ec2 = aws_sdk_ec2::config::Builder::from(&self.sdk)
                    .region(Region::new(region.to_string()));
                let mut asg = aws_sdk_autoscaling::config::Builder::from(&self.sdk)
                    .region(Region::new(region.to_string()));
                if let Some(url) = &self.endpoint_url {
                    eks = eks.endpoint_url(url);
                    ec2 = ec2.endpoint_url(url);
                    asg = asg.endpoint_url(url);
                }
                if let Some(url) = &self.eks_endpoint_url {
                    eks = eks.endpoint_url(url);
                }
                EksClients {
                    eks: aws_sdk_eks::Client::from_conf(eks.build()),
                    ec2: aws_sdk_ec2::Client::from_conf(ec2.build()),
                    asg: aws_sdk_autoscaling::Client::from_conf(asg.build()),
                }
            })
            .clone()
    }

    pub(crate) fn retry(&self) -> &RetryPolicy {
        &self.retry
    }

    /// `DescribeNodegroup`.
    pub(crate) async fn nodegroup(
        &self,
        c: &EksClients,
        cluster: &str,
        name: &str,
        subject: &str,
    ) -> Result<Nodegroup, CloudError> {
        const CALL: &str = "DescribeNodegroup";
        let out = self
            .retry
            .run(CALL, subject, || async {
                c.eks
                    .describe_nodegroup()
                    .cluster_name(cluster)
                    .nodegroup_name(name)
                    .send()
                    .await
                    .map_err(|e| from_sdk(e, CALL, subject))
            })
            .await?;
        out.nodegroup.ok_or_else(|| {
            CloudError::about(
                CloudErrorKind::Invalid,
                CALL,
                subject,
                "EKS answered without a node group",
            )
        })
    }

    /// One version of the node group's launch template (`DescribeLaunchTemplateVersions`).
    pub(crate) async fn template_version(
        &self,
        c: &EksClients,
        t: &NodegroupTemplate,
        version: &str,
        subject: &str,
    ) -> Result<TemplateVersion, CloudError> {
        const CALL: &str = "DescribeLaunchTemplateVersions";
        let v = super::describe_template_version(
            &c.ec2,
            &self.retry,
            (&t.id, &t.name),
            version,
            subject,
        )
        .await?
        .ok_or_else(|| {
            CloudError::about(
                CloudErrorKind::Invalid,
                CALL,
                subject,
                format!(
                    "the node group's launch template {} has no version {version}",
                    t.id.as_deref().or(t.name.as_deref()).unwrap_or_default()
                ),
            )
        })?;
        Ok(TemplateVersion {
            number: v.version_number().unwrap_or_default(),
            image: v
                .launch_template_data()
                .and_then(|d| d.image_id())
                .unwrap_or_default()
                .to_string(),
            description: v.version_description().unwrap_or_default().to_string(),
        })
    }

    /// Every update of the node group EKS lists (`ListUpdates`, paged), each described
    /// (`DescribeUpdate`) unless already seen finished.
    async fn updates(
        &self,
        c: &EksClients,
        cluster: &str,
        name: &str,
        subject: &str,
    ) -> Result<Vec<Update>, CloudError> {
        const LIST: &str = "ListUpdates";
        const DESCRIBE: &str = "DescribeUpdate";
        let mut ids = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = self
                .retry
                .run(LIST, subject, || async {
                    c.eks
                        .list_updates()
                        .name(cluster)
                        .nodegroup_name(name)
                        .set_next_token(token.clone())
                        .send()
                        .await
                        .map_err(|e| from_sdk(e, LIST, subject))
                })
                .await?;
            ids.extend(out.update_ids().iter().cloned());
            token = out.next_token().map(str::to_string);
            if token.is_none() || ids.len() >= MAX_UPDATES {
                break;
            }
        }
        let mut updates = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(done) = self.finished.lock().unwrap().get(&id) {
                updates.push(done.clone());
                continue;
            }
            let out = self
                .retry
                .run(DESCRIBE, subject, || async {
                    c.eks
                        .describe_update()
                        .name(cluster)
                        .nodegroup_name(name)
                        .update_id(&id)
                        .send()
                        .await
                        .map_err(|e| from_sdk(e, DESCRIBE, subject))
                })
                .await?;
            let Some(update) = out.update else { continue };
            if status_of(&update) != UpdateStatus::InProgress {
                self.finished
                    .lock()
                    .unwrap()
                    .insert(id.clone(), update.clone());
            }
            updates.push(update);
        }
        Ok(updates)
    }

    /// The version `CreateLaunchTemplateVersion` makes for `req`, or the one a start with
    /// the same token already made (a retry after a crash or a lost answer).
    pub(crate) async fn version_for(
        &self,
        c: &EksClients,
        t: &NodegroupTemplate,
        current: &TemplateVersion,
        req: &UpdateRequest,
        subject: &str,
    ) -> Result<i64, CloudError> {
        const CALL: &str = "CreateLaunchTemplateVersion";
        let description = format!("{VERSION_DESCRIPTION_PREFIX}{}", req.token);
        let latest = self.template_version(c, t, "$Latest", subject).await?;
        if latest.description == description && latest.image == req.image {
            return Ok(latest.number);
        }
        let data = aws_sdk_ec2::types::RequestLaunchTemplateData::builder()
            .image_id(&req.image)
            .build();
        let out = self
            .retry
            .run(CALL, subject, || async {
                c.ec2
                    .create_launch_template_version()
                    .set_launch_template_id(t.id.clone())
                    .set_launch_template_name(if t.id.is_some() { None } else { t.name.clone() })
                    // EC2 copies the source version and lays the data given over it: the
                    // new version differs from the node group's own in the AMI only.
                    .source_version(current.number.to_string())
                    .version_description(&description)
                    .launch_template_data(data.clone())
                    .send()
                    .await
                    .map_err(|e| from_sdk(e, CALL, subject))
            })
            .await?;
        out.launch_template_version()
            .and_then(|v| v.version_number())
            .ok_or_else(|| {
                CloudError::about(
                    CloudErrorKind::Invalid,
                    CALL,
                    subject,
                    "EC2 answered without the new version's number",
                )
            })
    }
}

impl AwsEksPools {
    /// The node group as `DescribeNodegroup` and its launch template version say: the
    /// image, size and `updateConfig`, without its updates (`update` is `None`; `describe`
    /// adds them).
    pub async fn nodegroup_state(&self, pool: &ManagedGroup) -> Result<OwnerPoolState, CloudError> {
        let (region, _, _) = eks_target(pool, "DescribeNodegroup")?;
        let c = self.clients(region);
        Ok(self.nodegroup_now(&c, pool).await?.0)
    }

    async fn nodegroup_now(
        &self,
        c: &EksClients,
        pool: &ManagedGroup,
    ) -> Result<(OwnerPoolState, NodegroupTemplate, TemplateVersion), CloudError> {
        let (_, cluster, name) = eks_target(pool, "DescribeNodegroup")?;
        let subject = pool.to_string();
        let ng = self.nodegroup(c, cluster, name, &subject).await?;
        let t = template_of(&ng, &subject)?;
        let current = self.template_version(c, &t, &t.version, &subject).await?;
        let state = OwnerPoolState {
            pool: pool.clone(),
            image: current.image.clone(),
            desired: ng
                .scaling_config()
                .and_then(|s| s.desired_size())
                .unwrap_or_default()
                .max(0) as u32,
            max_unavailable: max_unavailable_of(&ng),
            update: None,
        };
        Ok((state, t, current))
    }
}

/// What [`AwsEksPools`] is, known before it is built ([`crate::cloud::lazy_owner`]).
pub const FACTS: OwnerFacts = OwnerFacts {
    owner: Owner::EksNodegroup,
    capabilities: OwnerCapabilities {
        service_update: true,
        max_unavailable: true,
        // EKS has no call that stops a node group's version update.
        cancel_update: false,
    },
    blue_green: true,
    describe_call: "DescribeNodegroup",
    update_call: "UpdateNodegroupVersion",
};

/// The node group's coordinates, or `Invalid` for a pool of another owner.
pub(crate) fn eks_target<'a>(
    pool: &'a ManagedGroup,
    call: &'static str,
) -> Result<(&'a str, &'a str, &'a str), CloudError> {
    match pool {
        ManagedGroup::EksNodegroup {
            region,
            eks_cluster,
            nodegroup,
        } => Ok((region, eks_cluster, nodegroup)),
        other => Err(CloudError::about(
            CloudErrorKind::Invalid,
            call,
            &other.to_string(),
            format!("{} is not an EKS managed node group", other.name()),
        )),
    }
}

/// The node group's launch template, or `Invalid` saying why rota cannot pin its AMI: a
/// node group made without one takes its AMI from `amiType` and `releaseVersion`, which EKS
/// chooses.
pub(crate) fn template_of(ng: &Nodegroup, subject: &str) -> Result<NodegroupTemplate, CloudError> {
    let lt = ng.launch_template().ok_or_else(|| {
        CloudError::about(
            CloudErrorKind::Invalid,
            "DescribeNodegroup",
            subject,
            "the node group has no launch template: EKS picks its AMI from amiType and \
             releaseVersion, and rota can set an AMI only through a launch template the node \
             group was created with",
        )
    })?;
    Ok(NodegroupTemplate {
        id: lt.id().map(str::to_string),
        name: lt.name().map(str::to_string),
        version: lt.version().unwrap_or("$Default").to_string(),
    })
}

/// EKS's update status in rota's words (an unknown status counts as still running: rota
/// waits rather than start a second update over it).
fn status_of(u: &Update) -> UpdateStatus {
    use aws_sdk_eks::types::UpdateStatus as Eks;
    match u.status() {
        Some(Eks::Successful) => UpdateStatus::Successful,
        Some(Eks::Failed) => UpdateStatus::Failed,
        Some(Eks::Cancelled) => UpdateStatus::Cancelled,
        _ => UpdateStatus::InProgress,
    }
}

/// The newest version update among `updates` (by `createdAt`; config updates, such as the
/// `updateConfig` rota sets before each start, are not the pool's update).
fn newest_version_update(updates: &[Update]) -> Option<&Update> {
    updates
        .iter()
        .filter(|u| u.r#type() == Some(&UpdateType::VersionUpdate))
        .max_by_key(|u| u.created_at().map(|t| (t.secs(), t.subsec_nanos())))
}

/// The launch template version a version update moves the node group to.
fn update_version(u: &Update) -> Option<&str> {
    u.params()
        .iter()
        .find(|p| p.r#type() == Some(&UpdateParamType::LaunchTemplateVersion))
        .and_then(|p| p.value())
}

/// The token rota described a launch template version with, if rota made it.
fn token_of(description: &str) -> Option<&str> {
    description
        .strip_prefix(VERSION_DESCRIPTION_PREFIX)
        .filter(|t| !t.is_empty())
}

/// EKS's `updateConfig` in rota's words.
fn max_unavailable_of(ng: &Nodegroup) -> Option<MaxUnavailable> {
    let cfg = ng.update_config()?;
    if let Some(p) = cfg.max_unavailable_percentage() {
        return Some(MaxUnavailable::Percent(p.clamp(1, 100) as u8));
    }
    cfg.max_unavailable()
        .map(|n| MaxUnavailable::Count(n.max(1) as u32))
}

/// An update as the planner reads it: `image` and `token` from the launch template version
/// it names (`version`, when rota could read it).
fn owner_update(u: &Update, version: Option<&TemplateVersion>) -> OwnerUpdate {
    OwnerUpdate {
        id: u.id().unwrap_or_default().to_string(),
        token: version.and_then(|v| token_of(&v.description).map(str::to_string)),
        image: version.map(|v| v.image.clone()).unwrap_or_default(),
        status: status_of(u),
        errors: u
            .errors()
            .iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e.error_code().map(|c| c.as_str()).unwrap_or("Error"),
                    e.error_message().unwrap_or_default()
                )
            })
            .collect(),
    }
}

#[async_trait]
impl OwnerPools for AwsEksPools {
    fn owner(&self) -> Owner {
        FACTS.owner
    }

    fn capabilities(&self) -> OwnerCapabilities {
        FACTS.capabilities
    }

    async fn describe(&self, pool: &ManagedGroup) -> Result<OwnerPoolState, CloudError> {
        let (region, cluster, name) = eks_target(pool, "DescribeNodegroup")?;
        let subject = pool.to_string();
        let c = self.clients(region);
        let (mut state, t, current) = self.nodegroup_now(&c, pool).await?;
        let updates = self.updates(&c, cluster, name, &subject).await?;
        state.update = match newest_version_update(&updates) {
            None => None,
            Some(u) => {
                let version = match update_version(u) {
                    Some(v) if v == current.number.to_string() => Some(current.clone()),
                    Some(v) => Some(self.template_version(&c, &t, v, &subject).await?),
                    None => None,
                };
                Some(owner_update(u, version.as_ref()))
            }
        };
        Ok(state)
    }

    async fn start_update(
        &self,
        pool: &ManagedGroup,
        req: &UpdateRequest,
    ) -> Result<String, CloudError> {
        const CONFIG: &str = "UpdateNodegroupConfig";
        const VERSION: &str = "UpdateNodegroupVersion";
        let (region, cluster, name) = eks_target(pool, VERSION)?;
        let subject = pool.to_string();
        let c = self.clients(region);
        let ng = self.nodegroup(&c, cluster, name, &subject).await?;
        let t = template_of(&ng, &subject)?;
        let current = self.template_version(&c, &t, &t.version, &subject).await?;
        let number = self.version_for(&c, &t, &current, req, &subject).await?;
        // `strategy: replace` is EKS's MINIMAL (old nodes terminated before the new ones
        // launch); a surge pool's update puts DEFAULT back, as a replace may have left it.
        let strategy = if req.drain_first {
            NodegroupUpdateStrategies::Minimal
        } else {
            NodegroupUpdateStrategies::Default
        };
        let current_strategy = ng
            .update_config()
            .and_then(|c| c.update_strategy())
            .cloned()
            .unwrap_or(NodegroupUpdateStrategies::Default);
        if max_unavailable_of(&ng) != Some(req.max_unavailable) || current_strategy != strategy {
            let cfg = match req.max_unavailable {
                MaxUnavailable::Count(n) => {
                    NodegroupUpdateConfig::builder().max_unavailable(n.clamp(1, 100) as i32)
                }
                MaxUnavailable::Percent(p) => NodegroupUpdateConfig::builder()
                    .max_unavailable_percentage(i32::from(p.clamp(1, 100))),
            }
            .update_strategy(strategy)
            .build();
            self.retry
                .run(CONFIG, &subject, || async {
                    c.eks
                        .update_nodegroup_config()
                        .cluster_name(cluster)
                        .nodegroup_name(name)
                        .update_config(cfg.clone())
                        .send()
                        .await
                        .map_err(|e| from_sdk(e, CONFIG, &subject))
                })
                .await?;
        }
        let spec = LaunchTemplateSpecification::builder()
            .set_id(t.id.clone())
            .set_name(if t.id.is_some() { None } else { t.name.clone() })
            .version(number.to_string())
            .build();
        let out = self
            .retry
            .run(VERSION, &subject, || async {
                c.eks
                    .update_nodegroup_version()
                    .cluster_name(cluster)
                    .nodegroup_name(name)
                    .launch_template(spec.clone())
                    .client_request_token(&req.token)
                    // `drain.onTimeout: force`: EKS terminates a node whose pods a
                    // PodDisruptionBudget keeps from draining, instead of failing the update.
                    .force(req.force)
                    .send()
                    .await
                    .map_err(|e| from_sdk(e, VERSION, &subject))
            })
            .await?;
        out.update.and_then(|u| u.id).ok_or_else(|| {
            CloudError::about(
                CloudErrorKind::Invalid,
                VERSION,
                &subject,
                "EKS answered without the update's ID",
            )
        })
    }

    fn blue_green(&self) -> bool {
        FACTS.blue_green
    }

    async fn create_twin(&self, req: &TwinRequest) -> Result<(), CloudError> {
        self.twin_create(req).await
    }

    async fn members(&self, pool: &ManagedGroup) -> Result<Option<OwnerPoolMembers>, CloudError> {
        self.twin_members(pool).await
    }

    async fn set_size(
        &self,
        pool: &ManagedGroup,
        desired: u32,
        max: u32,
    ) -> Result<(), CloudError> {
        self.twin_set_size(pool, desired, max).await
    }

    async fn remove_node(&self, pool: &ManagedGroup, instance_id: &str) -> Result<(), CloudError> {
        self.twin_remove_node(pool, instance_id).await
    }

    async fn delete_pool(&self, pool: &ManagedGroup) -> Result<(), CloudError> {
        self.twin_delete(pool).await
    }

    async fn twins_of(&self, pool: &ManagedGroup) -> Result<Vec<OwnerPoolMembers>, CloudError> {
        self.twin_list(pool).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_eks::types::{ErrorCode, ErrorDetail, UpdateParam, UpdateStatus as Eks};
    use aws_smithy_types::DateTime;

    fn update(id: &str, ty: UpdateType, status: Eks, at: i64, version: &str) -> Update {
        Update::builder()
            .id(id)
            .r#type(ty)
            .status(status)
            .created_at(DateTime::from_secs(at))
            .params(
                UpdateParam::builder()
                    .r#type(UpdateParamType::LaunchTemplateVersion)
                    .value(version)
                    .build(),
            )
            .build()
    }

    #[test]
    fn the_newest_version_update_is_the_pools_not_a_newer_config_update() {
        let updates = [
            update("old", UpdateType::VersionUpdate, Eks::Successful, 100, "3"),
            update("cfg", UpdateType::ConfigUpdate, Eks::Successful, 300, "4"),
            update("new", UpdateType::VersionUpdate, Eks::InProgress, 200, "4"),
        ];
        let u = newest_version_update(&updates).unwrap();
        assert_eq!(u.id(), Some("new"));
        assert_eq!(update_version(u), Some("4"));
        assert_eq!(newest_version_update(&updates[1..2]), None);
    }

    #[test]
    fn an_update_carries_the_token_and_ami_of_the_version_rota_described() {
        let u = update("u1", UpdateType::VersionUpdate, Eks::Failed, 1, "7")
            .errors()
            .to_vec();
        assert!(u.is_empty());
        let u = Update::builder()
            .id("u1")
            .r#type(UpdateType::VersionUpdate)
            .status(Eks::Failed)
            .errors(
                ErrorDetail::builder()
                    .error_code(ErrorCode::NodeCreationFailure)
                    .error_message("Instances failed to join the kubernetes cluster")
                    .build(),
            )
            .build();
        let v = TemplateVersion {
            number: 7,
            image: "ami-0f9e8d7c6b5a40312".into(),
            description: "rota: rota-general-ami-0f9e8d7c6b5a40312-1700000000".into(),
        };
        let got = owner_update(&u, Some(&v));
        assert_eq!(got.id, "u1");
        assert_eq!(
            got.token.as_deref(),
            Some("rota-general-ami-0f9e8d7c6b5a40312-1700000000")
        );
        assert_eq!(got.image, "ami-0f9e8d7c6b5a40312");
        assert_eq!(got.status, UpdateStatus::Failed);
        assert_eq!(
            got.errors,
            vec!["NodeCreationFailure: Instances failed to join the kubernetes cluster"]
        );
        // A version someone else made (the console, Terraform) carries no token: the
        // planner then never takes the update for its own.
        let theirs = TemplateVersion {
            description: "terraform".into(),
            ..v
        };
        assert_eq!(owner_update(&u, Some(&theirs)).token, None);
        assert_eq!(token_of("rota: "), None);
    }

    #[test]
    fn an_unknown_status_counts_as_running() {
        let u = Update::builder()
            .status(Eks::from("Paused"))
            .r#type(UpdateType::VersionUpdate)
            .build();
        assert_eq!(status_of(&u), UpdateStatus::InProgress);
    }
}
