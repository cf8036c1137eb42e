//! AWS node groups: [`NodeGroups`] on EC2 Auto Scaling groups and their launch templates.
//!
//! Calls, per operation (each wrapped in the shared [`RetryPolicy`]):
//! - `describe`: `DescribeAutoScalingGroups` (capacity, template, instances and their
//!   lifecycle), `DescribeLaunchTemplateVersions` (the AMI of the version the group
//!   points at, `$Latest`/`$Default` and SSM aliases resolved), `DescribeInstances` (each
//!   instance's AMI, filtered by instance ID, 200 at a time).
//! - `check_image`: `DescribeImages` of the AMI in the group's region: `available`, of the
//!   pool's architecture (`InvalidAMIID.NotFound`, as EC2 answers for another region's AMI,
//!   is an unusable image, not a failed call). An SSM alias (`resolve:ssm:…`) is resolved by
//!   EC2 at launch and is not checked here.
//! - `find_image` (`rota images discover`): `GetParameter` of an SSM parameter (the public
//!   EKS and Bottlerocket ones hold an AMI ID per region and arch), then `DescribeImages` of
//!   that AMI (its name and creation date, `available`, the arch); or `DescribeImages` with
//!   `owners` and the `name` and `state=available` filters, of the arch asked, newest by
//!   `CreationDate`.
//! - `set_image`: `CreateLaunchTemplateVersion` from the current version (`SourceVersion`)
//!   with only `ImageId` changed, then `UpdateAutoScalingGroup` pinning the group to the new
//!   version number (in its launch template or its mixed-instances policy).
//! - `set_capacity`: `UpdateAutoScalingGroup` with `MaxSize` and `DesiredCapacity` together
//!   when a maximum is given (one call: raising and restoring the maximum need no ordering),
//!   `SetDesiredCapacity` otherwise.
//! - `terminate`: `TerminateInstanceInAutoScalingGroup` with `ShouldDecrementDesiredCapacity`.
//!
//! Credentials come from the SDK's standard chain: environment, shared profile, web identity
//! (IRSA), container credentials (EKS Pod Identity, ECS), instance metadata. HTTPS goes
//! through rustls on ring. The SDK's own retries are disabled so that exactly one policy —
//! rota's — decides about retries, timeouts and backoff for every cloud alike.

pub mod eks;
pub mod eks_twin;
pub mod errors;
pub mod inventory;
pub mod template;

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::{Region, SdkConfig};
use aws_sdk_autoscaling::types::AutoScalingGroup;
use aws_sdk_ec2::types::{Filter, RequestLaunchTemplateData};
use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};

use self::errors::from_sdk;
use self::template::{TemplateRef, group_template, lifecycle};
use super::retry::RetryPolicy;
use super::{
    CloudError, CloudErrorKind, FoundImage, GroupRef, GroupState, ImageQuery, Instance, Lifecycle,
    NodeGroups, provider_id,
};

/// The SDK configuration from the standard chain, with rota's HTTPS client (rustls on ring)
/// and without the SDK's retries; the region `us-east-1` when the chain names none (it is
/// used only to fetch credentials from STS: each call goes to its group's region).
pub(crate) async fn load_sdk_config() -> SdkConfig {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https();
    // The loader's own region chain (environment, profile, instance metadata) shares
    // the HTTP client above; a chain built apart would have none.
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .http_client(http)
        // One retry policy applies, rota's (see `RetryPolicy::run` around every call).
        .retry_config(RetryConfig::disabled())
        .load()
        .await;
    if sdk.region().is_none() {
        sdk.into_builder().region(Region::new("us-east-1")).build()
    } else {
        sdk
    }
}

/// A configuration built by a caller, its retries turned off: rota's policy applies.
pub(crate) fn without_sdk_retries(sdk: SdkConfig) -> SdkConfig {
    sdk.into_builder()
        .retry_config(RetryConfig::disabled())
        .build()
}

/// EC2 takes at most 200 values in one filter.
const INSTANCE_BATCH: usize = 200;

/// The Auto Scaling and EC2 clients of one region.
#[derive(Clone)]
struct Clients {
    asg: aws_sdk_autoscaling::Client,
    ec2: aws_sdk_ec2::Client,
    ssm: aws_sdk_ssm::Client,
}

/// [`NodeGroups`] for AWS Auto Scaling groups, in any region (clients are made per region
/// on first use and kept).
pub struct AwsNodeGroups {
    sdk: SdkConfig,
    endpoint_url: Option<String>,
    retry: RetryPolicy,
    clients: Mutex<HashMap<String, Clients>>,
}

/// The launch template version a group points at, as EC2 resolves it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Version {
    template_id: String,
    number: i64,
    image: String,
}

impl AwsNodeGroups {
    /// The provider with credentials from the standard chain (environment, profile, IRSA web
    /// identity, EKS Pod Identity / container credentials, instance metadata).
    ///
    /// `endpoint_url` replaces the Auto Scaling and EC2 endpoints (moto in tests, a proxy);
    /// `None` uses AWS's regional endpoints (VPC interface endpoints with private DNS need
    /// nothing else; `AWS_ENDPOINT_URL_AUTO_SCALING` / `AWS_ENDPOINT_URL_EC2` are honoured
    /// too). The region of each call is the group's; the chain's region (`AWS_REGION`,
    /// profile, else `us-east-1`) is used only to fetch credentials from STS.
    pub async fn from_env(endpoint_url: Option<String>, retry: RetryPolicy) -> AwsNodeGroups {
        AwsNodeGroups::from_sdk_config(load_sdk_config().await, endpoint_url, retry)
    }

    /// The provider on an SDK configuration built by the caller (its credentials provider,
    /// HTTP client). The configuration's retries are turned off here: rota's policy applies.
    pub fn from_sdk_config(
        sdk: SdkConfig,
        endpoint_url: Option<String>,
        retry: RetryPolicy,
    ) -> AwsNodeGroups {
        let sdk = without_sdk_retries(sdk);
        AwsNodeGroups {
            sdk,
            endpoint_url,
            retry,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// The AMI ID an SSM parameter holds in `region` (`GetParameter`); a parameter that
    /// does not exist is `NotFound`, one that holds something else `Invalid`.
    async fn ssm_ami(
        &self,
        c: &Clients,
        query: &ImageQuery,
        region: &str,
        parameter: &str,
    ) -> Result<String, CloudError> {
        const CALL: &str = "GetParameter";
        let out = self
            .retry
            .run(CALL, query, || async {
                c.ssm
                    .get_parameter()
                    .name(parameter)
                    .send()
                    .await
                    .map_err(|e| from_sdk(e, CALL, query))
            })
            .await;
        let out = match out {
            Ok(out) => out,
            Err(mut e) if e.message.starts_with("ParameterNotFound") => {
                e.kind = CloudErrorKind::NotFound;
                e.message = format!("SSM parameter {parameter} does not exist in {region}");
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        let value = out
            .parameter()
            .and_then(|p| p.value())
            .unwrap_or_default()
            .trim()
            .to_string();
        // The value is never quoted: a parameter named by mistake (or on purpose) may hold a
        // password or a database URL, and this error goes to CI and CronJob logs.
        if rota_core::fleet::validate::check_image(rota_core::cloud::Cloud::Aws, &value).is_err() {
            return Err(CloudError::query(
                CloudErrorKind::Invalid,
                CALL,
                query,
                format!(
                    "SSM parameter {parameter} in {region}: the value is not an AMI ID ({})",
                    rota_core::images::answers::describe_value(&value)
                ),
            ));
        }
        Ok(value)
    }

    fn clients(&self, region: &str) -> Clients {
        let mut clients = self.clients.lock().unwrap();
        clients
            .entry(region.to_string())
            .or_insert_with(|| {
                let mut asg = aws_sdk_autoscaling::config::Builder::from(&self.sdk)
                    .region(Region::new(region.to_string()));
                let mut ec2 = aws_sdk_ec2::config::Builder::from(&self.sdk)
                    .region(Region::new(region.to_string()));
                let mut ssm = aws_sdk_ssm::config::Builder::from(&self.sdk)
                    .region(Region::new(region.to_string()));
                if let Some(url) = &self.endpoint_url {
                    asg = asg.endpoint_url(url);
                    ec2 = ec2.endpoint_url(url);
                    ssm = ssm.endpoint_url(url);
                }
                Clients {
                    asg: aws_sdk_autoscaling::Client::from_conf(asg.build()),
                    ec2: aws_sdk_ec2::Client::from_conf(ec2.build()),
                    ssm: aws_sdk_ssm::Client::from_conf(ssm.build()),
                }
            })
            .clone()
    }

    /// The group's Auto Scaling name and the clients of its region; `Invalid` for a group of
    /// another cloud.
    fn target<'a>(
        &self,
        group: &'a GroupRef,
        call: &'static str,
    ) -> Result<(&'a str, Clients), CloudError> {
        match group {
            GroupRef::Aws {
                region,
                auto_scaling_group,
            } => Ok((auto_scaling_group, self.clients(region))),
            other => Err(CloudError::new(
                CloudErrorKind::Invalid,
                call,
                group,
                format!("not an AWS Auto Scaling group: {other}"),
            )),
        }
    }

    /// `DescribeAutoScalingGroups` for one group; `NotFound` when AWS lists none.
    async fn asg(&self, group: &GroupRef) -> Result<(AutoScalingGroup, Clients), CloudError> {
        const CALL: &str = "DescribeAutoScalingGroups";
        let (name, c) = self.target(group, CALL)?;
        let out = self
            .retry
            .run(CALL, group, || async {
                c.asg
                    .describe_auto_scaling_groups()
                    .auto_scaling_group_names(name)
                    .send()
                    .await
                    .map_err(|e| from_sdk(e, CALL, group))
            })
            .await?;
        let g = out
            .auto_scaling_groups()
            .iter()
            .find(|g| g.auto_scaling_group_name() == Some(name))
            .cloned()
            .ok_or_else(|| {
                CloudError::new(
                    CloudErrorKind::NotFound,
                    CALL,
                    group,
                    "no such Auto Scaling group",
                )
            })?;
        Ok((g, c))
    }

    /// The template the group points at, or `Invalid` saying why rota cannot use it.
    fn template_of(
        g: &AutoScalingGroup,
        group: &GroupRef,
        call: &'static str,
    ) -> Result<TemplateRef, CloudError> {
        group_template(g).map_err(|u| {
            CloudError::new(
                CloudErrorKind::Invalid,
                call,
                group,
                format!("cannot manage the group's image: {}", u.0),
            )
        })
    }

    /// One version of the template (`version`: a number, `$Latest` or `$Default`).
    async fn version(
        &self,
        c: &Clients,
        group: &GroupRef,
        t: &TemplateRef,
        version: &str,
    ) -> Result<Version, CloudError> {
        const CALL: &str = "DescribeLaunchTemplateVersions";
        let v = describe_template_version(&c.ec2, &self.retry, (&t.id, &t.name), version, group)
            .await?
            .ok_or_else(|| {
                CloudError::new(
                    CloudErrorKind::Invalid,
                    CALL,
                    group,
                    format!(
                        "launch template {} has no version {version}",
                        t.id.as_deref().or(t.name.as_deref()).unwrap_or_default()
                    ),
                )
            })?;
        Ok(Version {
            template_id: v.launch_template_id().unwrap_or_default().to_string(),
            number: v.version_number().unwrap_or_default(),
            image: v
                .launch_template_data()
                .and_then(|d| d.image_id())
                .unwrap_or_default()
                .to_string(),
        })
    }

    /// The AMI of each instance, from EC2; instances EC2 does not list yet (just launched,
    /// its reads are eventually consistent) are absent.
    async fn images(
        &self,
        c: &Clients,
        group: &GroupRef,
        ids: &[String],
    ) -> Result<BTreeMap<String, String>, CloudError> {
        const CALL: &str = "DescribeInstances";
        let mut images = BTreeMap::new();
        for chunk in ids.chunks(INSTANCE_BATCH) {
            // A filter rather than InstanceIds: an ID EC2 does not know yet fails the whole
            // request with InstanceIds, and is simply absent with a filter.
            let filter = Filter::builder()
                .name("instance-id")
                .set_values(Some(chunk.to_vec()))
                .build();
            let mut token: Option<String> = None;
            loop {
                let out = self
                    .retry
                    .run(CALL, group, || async {
                        c.ec2
                            .describe_instances()
                            .filters(filter.clone())
                            .set_next_token(token.clone())
                            .send()
                            .await
                            .map_err(|e| from_sdk(e, CALL, group))
                    })
                    .await?;
                for r in out.reservations() {
                    for i in r.instances() {
                        if let (Some(id), Some(image)) = (i.instance_id(), i.image_id()) {
                            images.insert(id.to_string(), image.to_string());
                        }
                    }
                }
                token = out
                    .next_token()
                    .map(str::to_string)
                    .filter(|t| !t.is_empty());
                if token.is_none() {
                    break;
                }
            }
        }
        Ok(images)
    }
}

fn capacity(v: Option<i32>) -> u32 {
    v.unwrap_or(0).max(0) as u32
}

#[async_trait]
impl NodeGroups for AwsNodeGroups {
    async fn describe(&self, group: &GroupRef) -> Result<GroupState, CloudError> {
        let (g, c) = self.asg(group).await?;
        let t = Self::template_of(&g, group, "DescribeLaunchTemplateVersions")?;
        let current = self.version(&c, group, &t, &t.version).await?;
        let live: Vec<(&str, &str, Lifecycle)> = g
            .instances()
            .iter()
            .filter_map(|i| {
                let state = lifecycle(i.lifecycle_state().map(|s| s.as_str()).unwrap_or(""))?;
                Some((
                    i.instance_id().unwrap_or_default(),
                    i.availability_zone().unwrap_or_default(),
                    state,
                ))
            })
            .collect();
        let ids: Vec<String> = live.iter().map(|(id, _, _)| id.to_string()).collect();
        let images = self.images(&c, group, &ids).await?;
        let instances = live
            .into_iter()
            .map(|(id, zone, state)| Instance {
                id: id.to_string(),
                provider_id: provider_id::aws(zone, id),
                // Not yet visible in EC2 (seconds after launch): the AMI it was launched
                // with is unknown, and an empty image is never mistaken for the target.
                image: images.get(id).cloned().unwrap_or_default(),
                zone: zone.to_string(),
                lifecycle: state,
                launch_error: None,
            })
            .collect();
        Ok(GroupState {
            group: group.clone(),
            desired: capacity(g.desired_capacity()),
            min: capacity(g.min_size()),
            max: capacity(g.max_size()),
            template_image: current.image,
            instances,
        })
    }

    async fn find_image(&self, query: &ImageQuery) -> Result<FoundImage, CloudError> {
        let (region, arch) = match query {
            ImageQuery::AwsSsm { region, arch, .. } | ImageQuery::AwsName { region, arch, .. } => {
                (region.as_str(), *arch)
            }
            _ => {
                return Err(CloudError::query(
                    CloudErrorKind::Invalid,
                    "FindImage",
                    query,
                    "not an AWS image source",
                ));
            }
        };
        // Defence in depth (validation and `images::queries` refuse it first): EC2 answers a
        // name filter without owners with every public AMI of that name, anyone's.
        if let ImageQuery::AwsName { owners, .. } = query
            && (owners.is_empty()
                || owners
                    .iter()
                    .any(|o| rota_core::fleet::image_source::check_aws_owner(o).is_err()))
        {
            return Err(CloudError::query(
                CloudErrorKind::Invalid,
                "DescribeImages",
                query,
                "a name filter is asked only within owners no stranger can be (account IDs, \
                 `self`, `amazon`): not asked",
            ));
        }
        let c = self.clients(region);
        let fail = |kind, call, message: String| CloudError::query(kind, call, query, message);
        let id = match query {
            ImageQuery::AwsSsm { parameter, .. } => {
                Some(self.ssm_ami(&c, query, region, parameter).await?)
            }
            _ => None,
        };
        const CALL: &str = "DescribeImages";
        let filter = |name: &str, value: &str| Filter::builder().name(name).values(value).build();
        let out = self
            .retry
            .run(CALL, query, || async {
                let req = c.ec2.describe_images();
                let req = match (&id, query) {
                    (Some(id), _) => req.image_ids(id).include_deprecated(true),
                    (
                        None,
                        ImageQuery::AwsName {
                            name_filter,
                            owners,
                            ..
                        },
                    ) => req
                        .set_owners(Some(owners.clone()))
                        .filters(filter("name", name_filter))
                        .filters(filter("state", "available")),
                    (None, _) => req,
                };
                req.send().await.map_err(|e| from_sdk(e, CALL, query))
            })
            .await;
        let images = match out {
            Ok(out) => out.images().to_vec(),
            Err(e) if e.message.starts_with("InvalidAMIID.") => Vec::new(),
            Err(e) => return Err(e),
        };
        // The arch is compared here rather than filtered by EC2: an image that reports
        // none (moto's registered ones) is taken as the one asked for, as `check_image` does.
        let newest = images
            .iter()
            .filter(|i| {
                id.is_some()
                    || i.architecture()
                        .is_none_or(|a| a.as_str().is_empty() || a.as_str() == arch.as_str())
            })
            .filter_map(|i| {
                let created = i
                    .creation_date()?
                    .parse::<chrono::DateTime<chrono::Utc>>()
                    .ok()?;
                Some((created, i))
            })
            .max_by(|a, b| a.0.cmp(&b.0));
        let Some((created, img)) = newest else {
            return Err(fail(
                CloudErrorKind::NotFound,
                CALL,
                match &id {
                    Some(id) => {
                        format!("the SSM parameter names {id}, which does not exist in {region}")
                    }
                    None => format!("no available {arch} AMI matches in {region}"),
                },
            ));
        };
        let image_id = img.image_id().unwrap_or_default().to_string();
        // The parameter's AMI must be usable as it is; a filter already asked for that.
        let state = img.state().map(|s| s.as_str()).unwrap_or_default();
        let found_arch = img.architecture().map(|a| a.as_str()).unwrap_or_default();
        if state != "available" {
            return Err(fail(
                CloudErrorKind::NotFound,
                CALL,
                format!("{image_id} in {region} is {state}, not available"),
            ));
        }
        if !found_arch.is_empty() && found_arch != arch.as_str() {
            return Err(fail(
                CloudErrorKind::Invalid,
                CALL,
                format!("{image_id} in {region} is {found_arch}, not {arch}"),
            ));
        }
        Ok(FoundImage {
            name: img.name().unwrap_or(&image_id).to_string(),
            id: image_id,
            created,
        })
    }

    async fn check_image(
        &self,
        group: &GroupRef,
        image: &str,
        arch: super::Arch,
    ) -> Result<super::ImageCheck, CloudError> {
        const CALL: &str = "DescribeImages";
        use super::ImageCheck;
        if image.starts_with("resolve:ssm:") {
            return Ok(ImageCheck::Usable);
        }
        let (_, c) = self.target(group, CALL)?;
        let region = match group {
            GroupRef::Aws { region, .. } => region.as_str(),
            _ => "",
        };
        let out = self
            .retry
            .run(CALL, group, || async {
                c.ec2
                    .describe_images()
                    .image_ids(image)
                    .include_deprecated(true)
                    .send()
                    .await
                    .map_err(|e| from_sdk(e, CALL, group))
            })
            .await;
        let out = match out {
            Ok(out) => out,
            // EC2 refuses the whole request for an ID it does not know in this region.
            Err(e) if e.message.starts_with("InvalidAMIID.") => {
                return Ok(ImageCheck::unusable(
                    "ImageNotFound",
                    format!("AMI {image} does not exist in {region}: {}", e.message),
                ));
            }
            Err(e) => return Err(e),
        };
        let Some(img) = out.images().iter().find(|i| i.image_id() == Some(image)) else {
            return Ok(ImageCheck::unusable(
                "ImageNotFound",
                format!("AMI {image} does not exist in {region} (DescribeImages lists none)"),
            ));
        };
        let state = img
            .state()
            .map(|s| s.as_str().to_string())
            .unwrap_or_default();
        if state != "available" {
            return Ok(ImageCheck::unusable(
                "ImageNotReady",
                format!("AMI {image} in {region} is {state}, not available"),
            ));
        }
        let found = img
            .architecture()
            .map(|a| a.as_str().to_string())
            .unwrap_or_default();
        if !found.is_empty() && found != arch.as_str() {
            return Ok(ImageCheck::unusable(
                "ImageWrongArch",
                format!("AMI {image} in {region} is {found} and the pool is {arch}"),
            ));
        }
        Ok(ImageCheck::Usable)
    }

    async fn set_image(&self, group: &GroupRef, image: &str) -> Result<(), CloudError> {
        let (g, c) = self.asg(group).await?;
        let name = group.name();
        let t = Self::template_of(&g, group, "CreateLaunchTemplateVersion")?;
        let current = self.version(&c, group, &t, &t.version).await?;
        if current.image == image {
            return Ok(());
        }
        // A retry after a crash between creating the version and pointing the group at it
        // finds that version as $Latest: use it rather than create another.
        let latest = self.version(&c, group, &t, "$Latest").await?;
        let target = if latest.number > current.number && latest.image == image {
            latest.number
        } else {
            const CALL: &str = "CreateLaunchTemplateVersion";
            let source = current.number.to_string();
            let out = self
                .retry
                .run(CALL, group, || async {
                    c.ec2
                        .create_launch_template_version()
                        .launch_template_id(&current.template_id)
                        // Everything else (instance type, user data, network, tags) is
                        // copied from the version the group runs now.
                        .source_version(&source)
                        .launch_template_data(
                            RequestLaunchTemplateData::builder().image_id(image).build(),
                        )
                        .version_description(format!("rota: {image} for {name}"))
                        .send()
                        .await
                        .map_err(|e| from_sdk(e, CALL, group))
                })
                .await?;
            out.launch_template_version()
                .and_then(|v| v.version_number())
                .ok_or_else(|| {
                    CloudError::new(
                        CloudErrorKind::Transient,
                        CALL,
                        group,
                        "the answer names no version number",
                    )
                })?
        };
        const CALL: &str = "UpdateAutoScalingGroup";
        self.retry
            .run(CALL, group, || async {
                let req = c
                    .asg
                    .update_auto_scaling_group()
                    .auto_scaling_group_name(name);
                let req = match (t.in_mixed_instances_policy, g.mixed_instances_policy()) {
                    (true, Some(mip)) => req.mixed_instances_policy(
                        template::repoint_mixed_instances_policy(mip, &current.template_id, target),
                    ),
                    _ => req.launch_template(template::pinned_spec(&current.template_id, target)),
                };
                req.send().await.map_err(|e| from_sdk(e, CALL, group))
            })
            .await?;
        Ok(())
    }

    async fn set_capacity(
        &self,
        group: &GroupRef,
        desired: u32,
        max: Option<u32>,
    ) -> Result<(), CloudError> {
        let (g, c) = self.asg(group).await?;
        let name = group.name();
        let (min, cur_max) = (capacity(g.min_size()), capacity(g.max_size()));
        let max_after = max.unwrap_or(cur_max);
        // AWS refuses these too; checking first gives the same answer on any endpoint and
        // says which bound and how to pass it.
        if desired > max_after {
            return Err(CloudError::new(
                CloudErrorKind::Invalid,
                if max.is_some() {
                    "UpdateAutoScalingGroup"
                } else {
                    "SetDesiredCapacity"
                },
                group,
                format!(
                    "desired capacity {desired} is above the maximum size {max_after}{}",
                    if max.is_none() {
                        " (pass a maximum to raise it)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        if desired < min {
            return Err(CloudError::new(
                CloudErrorKind::Invalid,
                "SetDesiredCapacity",
                group,
                format!("desired capacity {desired} is below the minimum size {min}"),
            ));
        }
        let (desired, max_i) = (desired as i32, max.map(|m| m as i32));
        match max_i {
            Some(m) => {
                const CALL: &str = "UpdateAutoScalingGroup";
                self.retry
                    .run(CALL, group, || async {
                        c.asg
                            .update_auto_scaling_group()
                            .auto_scaling_group_name(name)
                            .max_size(m)
                            .desired_capacity(desired)
                            .send()
                            .await
                            .map_err(|e| from_sdk(e, CALL, group))
                    })
                    .await?;
            }
            None => {
                const CALL: &str = "SetDesiredCapacity";
                self.retry
                    .run(CALL, group, || async {
                        c.asg
                            .set_desired_capacity()
                            .auto_scaling_group_name(name)
                            .desired_capacity(desired)
                            // rota's surge is deliberate, not a scaling policy's reaction.
                            .honor_cooldown(false)
                            .send()
                            .await
                            .map_err(|e| from_sdk(e, CALL, group))
                    })
                    .await?;
            }
        }
        Ok(())
    }

    async fn set_max(&self, group: &GroupRef, max: u32) -> Result<(), CloudError> {
        const CALL: &str = "UpdateAutoScalingGroup";
        let (g, c) = self.asg(group).await?;
        let name = group.name();
        // MaxSize alone leaves DesiredCapacity to whoever else sets it (the cluster
        // autoscaler). AWS refuses a maximum below the desired capacity; the floor is the
        // value just read, so only a change in the round trip can make it refuse (Invalid,
        // and the next pass reads again).
        let max = max.max(capacity(g.desired_capacity())) as i32;
        if g.max_size() == Some(max) {
            return Ok(());
        }
        self.retry
            .run(CALL, group, || async {
                c.asg
                    .update_auto_scaling_group()
                    .auto_scaling_group_name(name)
                    .max_size(max)
                    .send()
                    .await
                    .map_err(|e| from_sdk(e, CALL, group))
            })
            .await?;
        Ok(())
    }

    async fn terminate(
        &self,
        group: &GroupRef,
        instance_id: &str,
        decrement: bool,
    ) -> Result<(), CloudError> {
        const CALL: &str = "TerminateInstanceInAutoScalingGroup";
        let (g, c) = self.asg(group).await?;
        let member = g
            .instances()
            .iter()
            .find(|i| i.instance_id() == Some(instance_id))
            .and_then(|i| lifecycle(i.lifecycle_state().map(|s| s.as_str()).unwrap_or("")));
        match member {
            // Gone, never this group's, or already on its way out: nothing to do, and the
            // capacity is not decremented a second time.
            None | Some(Lifecycle::Terminating) => return Ok(()),
            Some(_) => {}
        }
        let (desired, min) = (capacity(g.desired_capacity()), capacity(g.min_size()));
        if decrement && desired <= min {
            return Err(CloudError::new(
                CloudErrorKind::Invalid,
                CALL,
                group,
                format!(
                    "decrementing desired capacity {desired} would go below the minimum size {min}; \
                     terminate without decrement or lower the minimum"
                ),
            ));
        }
        let r = self
            .retry
            .run(CALL, group, || async {
                c.asg
                    .terminate_instance_in_auto_scaling_group()
                    .instance_id(instance_id)
                    .should_decrement_desired_capacity(decrement)
                    .send()
                    .await
                    .map_err(|e| from_sdk(e, CALL, group))
            })
            .await;
        match r {
            // Gone between the describe and the call.
            Err(e) if errors::instance_gone(&e.message) => Ok(()),
            Err(e) => Err(e),
            Ok(_) => Ok(()),
        }
    }
}

/// One version of a launch template named by `(id, name)` (the ID when there is one; `version`:
/// a number, `$Latest` or `$Default`), as EC2 describes it; `None` when EC2 lists no such version. The one read of a template version,
/// for a self-managed group's template and an EKS node group's alike; `subject` names what
/// the caller reads it for in errors.
pub(crate) async fn describe_template_version(
    ec2: &aws_sdk_ec2::Client,
    retry: &RetryPolicy,
    (id, name): (&Option<String>, &Option<String>),
    version: &str,
    subject: &(impl std::fmt::Display + ?Sized),
) -> Result<Option<aws_sdk_ec2::types::LaunchTemplateVersion>, CloudError> {
    const CALL: &str = "DescribeLaunchTemplateVersions";
    let out = retry
        .run(CALL, subject, || async {
            ec2.describe_launch_template_versions()
                .set_launch_template_id(id.clone())
                .set_launch_template_name(if id.is_some() { None } else { name.clone() })
                .versions(version)
                // An ImageId of `resolve:ssm:…` comes back as the AMI it names.
                .resolve_alias(true)
                .send()
                .await
                .map_err(|e| from_sdk(e, CALL, subject))
        })
        .await?;
    Ok(out.launch_template_versions().first().cloned())
}
