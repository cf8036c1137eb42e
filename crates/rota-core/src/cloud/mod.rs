//! The cloud's side of a pool, as rota decides about it: a group's state ([`GroupState`],
//! its [`Instance`]s), what a failed call means ([`CloudError`], classified once), and the one
//! narrow trait every provider implements ([`NodeGroups`]), with the contracts written on each
//! method. The providers themselves (AWS, GCP, Azure, the simulated cloud) live at the edges;
//! the conformance suite in `tests/` holds each to these contracts.

pub mod karpenter;
pub mod managed;
pub mod provider_id;

use std::fmt;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::errors::{Class, Classified, Classify};
pub use crate::fleet::resolved::{Arch, Cloud, GroupRef};

/// Where an instance is in its life, as far as rota cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Lifecycle {
    /// Requested, booting: counts against capacity, has no node yet.
    Pending,
    /// Running; its node may or may not have registered yet.
    InService,
    /// Termination requested and under way.
    Terminating,
}

/// One machine of a group. Terminated instances are not listed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    /// The cloud's own ID (`i-0abc…`, a GCE instance name, a VMSS instance ID).
    pub id: String,
    /// The Kubernetes `spec.providerID` its node registers with, in the cloud's real format.
    pub provider_id: String,
    /// The image it booted from.
    pub image: String,
    pub zone: String,
    pub lifecycle: Lifecycle,
    /// Why the cloud's last attempt to create (provision) this instance failed, when it says
    /// so per instance: GCP's `lastAttempt.errors` of a managed instance still `CREATING`, an
    /// Azure scale set VM whose provisioning `Failed`. `None` for an instance that is fine or
    /// a cloud that reports launch failures elsewhere (AWS: scaling activities).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_error: Option<LaunchError>,
}

/// A failed attempt to create an instance, classified like a failed call (its [`CloudErrorKind`]
/// decides what the rotation does about it: see `rotate::plan`, a stalled kind such as `Quota`
/// fails the batch at once, the others are waited out within `nodeReadyTimeout`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LaunchError {
    pub kind: CloudErrorKind,
    /// The cloud's own code, e.g. `ZONE_RESOURCE_POOL_EXHAUSTED`, `QUOTA_EXCEEDED`,
    /// `AllocationFailed`.
    pub code: String,
    /// The cloud's message.
    pub message: String,
}

impl LaunchError {
    /// Whether the cloud refused the launch for want of capacity in the zone (a stock-out),
    /// which heals as capacity frees, unlike a quota or an invalid template: rota waits it
    /// out and asks again (`rollout.nodeReadyRetries`) rather than fail the batch at once.
    /// The codes are the clouds' own: GCP's `ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS]`,
    /// AWS's `InsufficientInstanceCapacity`, Azure's `AllocationFailed`,
    /// `ZonalAllocationFailed` and `OverconstrainedAllocationRequest`.
    pub fn is_capacity_shortfall(&self) -> bool {
        matches!(
            self.code.as_str(),
            "ZONE_RESOURCE_POOL_EXHAUSTED"
                | "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"
                | "InsufficientInstanceCapacity"
                | "AllocationFailed"
                | "ZonalAllocationFailed"
                | "OverconstrainedAllocationRequest"
                | "OverconstrainedZonalAllocationRequest"
        )
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// A group as described by its cloud at one moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupState {
    pub group: GroupRef,
    pub desired: u32,
    pub min: u32,
    pub max: u32,
    /// The image instances created from now on boot from.
    pub template_image: String,
    pub instances: Vec<Instance>,
}

/// Whether an image can launch where a group launches, as its cloud says right now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ImageCheck {
    Usable,
    /// Not usable there now; nothing is surged on it. `reason` is a stable CamelCase word
    /// (`ImageNotFound`, `ImageNotReady`, `ImageDeprecated`, `ImageWrongArch`,
    /// `ImageNotReplicated`), `message` names the image, the region and what the cloud said.
    Unusable {
        reason: String,
        message: String,
    },
}

impl ImageCheck {
    pub fn unusable(reason: &str, message: impl Into<String>) -> Self {
        ImageCheck::Unusable {
            reason: reason.to_string(),
            message: message.into(),
        }
    }
}

/// What `rota images discover` asks a cloud: the newest image of one source where the fleet
/// needs it (one region and arch for AWS; GCP images are global; an Azure gallery image
/// version must be replicated to every region its scale sets launch in).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ImageQuery {
    /// An SSM parameter that holds an AMI ID (the public EKS and Bottlerocket ones, or the
    /// account's own), read in `region`; `{arch}` already replaced.
    #[serde(rename_all = "camelCase")]
    AwsSsm {
        region: String,
        parameter: String,
        arch: Arch,
    },
    /// The newest `available` AMI of `owners` whose name matches `name_filter` (`*`, `?`).
    #[serde(rename_all = "camelCase")]
    AwsName {
        region: String,
        name_filter: String,
        owners: Vec<String>,
        arch: Arch,
    },
    /// `images.getFromFamily`: the family's newest READY image that is not deprecated.
    #[serde(rename_all = "camelCase")]
    GcpFamily {
        project: String,
        family: String,
        arch: Arch,
    },
    /// The gallery image definition's newest version that succeeded, is not excluded from
    /// latest, and is replicated to `regions`.
    #[serde(rename_all = "camelCase")]
    AzureGallery {
        gallery_image: String,
        regions: Vec<String>,
        arch: Arch,
    },
}

impl ImageQuery {
    pub fn cloud(&self) -> Cloud {
        match self {
            ImageQuery::AwsSsm { .. } | ImageQuery::AwsName { .. } => Cloud::Aws,
            ImageQuery::GcpFamily { .. } => Cloud::Gcp,
            ImageQuery::AzureGallery { .. } => Cloud::Azure,
        }
    }

    pub fn arch(&self) -> Arch {
        match self {
            ImageQuery::AwsSsm { arch, .. }
            | ImageQuery::AwsName { arch, .. }
            | ImageQuery::GcpFamily { arch, .. }
            | ImageQuery::AzureGallery { arch, .. } => *arch,
        }
    }

    /// The AWS region asked (`None` elsewhere).
    pub fn region(&self) -> Option<&str> {
        match self {
            ImageQuery::AwsSsm { region, .. } | ImageQuery::AwsName { region, .. } => Some(region),
            _ => None,
        }
    }
}

impl fmt::Display for ImageQuery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageQuery::AwsSsm {
                region,
                parameter,
                arch,
            } => write!(f, "SSM parameter {parameter} in {region} ({arch})"),
            ImageQuery::AwsName {
                region,
                name_filter,
                owners,
                arch,
            } => write!(
                f,
                "AMIs named {name_filter} of {} in {region} ({arch})",
                if owners.is_empty() {
                    "any owner".to_string()
                } else {
                    owners.join(", ")
                }
            ),
            ImageQuery::GcpFamily {
                project,
                family,
                arch,
            } => write!(f, "image family {project}/{family} ({arch})"),
            ImageQuery::AzureGallery {
                gallery_image,
                arch,
                ..
            } => write!(f, "gallery image {gallery_image} ({arch})"),
        }
    }
}

/// The answer to an [`ImageQuery`]: the image's ID as the fleet repo writes it, the name the
/// cloud gives it (the build, compared across regions), and when it was published.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FoundImage {
    pub id: String,
    pub name: String,
    pub created: chrono::DateTime<chrono::Utc>,
}

/// What a retry should do about a failed call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CloudErrorKind {
    /// Network error, 5xx: retry soon with backoff.
    Transient,
    /// 429 / rate exceeded: retry later with backoff.
    Throttled,
    /// The group or instance does not exist (see each method for what that means).
    NotFound,
    /// Quota or capacity exhausted: will not heal by retrying soon; pause and report.
    Quota,
    /// Credentials lack a permission: needs a human.
    Permission,
    /// The request itself is wrong (bad image ID, capacity above a hard limit): needs a human.
    Invalid,
}

impl CloudErrorKind {
    /// Whether retrying the same call may succeed without anyone changing anything.
    pub fn is_retryable(self) -> bool {
        self.classify().class == Class::Transient
    }

    /// A stable, low-cardinality label for metrics and events.
    pub fn reason(self) -> &'static str {
        match self {
            CloudErrorKind::Transient => "Transient",
            CloudErrorKind::Throttled => "Throttled",
            CloudErrorKind::NotFound => "NotFound",
            CloudErrorKind::Quota => "QuotaExceeded",
            CloudErrorKind::Permission => "PermissionDenied",
            CloudErrorKind::Invalid => "InvalidRequest",
        }
    }
}

impl Classify for CloudErrorKind {
    /// Quota is stalled: capacity rarely appears on the timescale of a retry loop and someone
    /// has to raise a limit. NotFound of a group: the repo names a group that does not exist.
    fn classify(&self) -> Classified {
        let class = match self {
            CloudErrorKind::Transient | CloudErrorKind::Throttled => Class::Transient,
            CloudErrorKind::NotFound
            | CloudErrorKind::Quota
            | CloudErrorKind::Permission
            | CloudErrorKind::Invalid => Class::Stalled,
        };
        Classified::new(class, self.reason())
    }
}

/// A failed cloud call, naming the call and the group so that an operator can find it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct CloudError {
    pub kind: CloudErrorKind,
    /// The provider's call, e.g. `SetDesiredCapacity`.
    pub call: &'static str,
    /// The group as [`GroupRef`]'s display renders it.
    pub group: String,
    pub message: String,
}

impl fmt::Display for CloudError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on {} failed ({}): {}",
            self.call,
            self.group,
            self.kind.reason(),
            self.message
        )
    }
}

impl CloudError {
    pub fn new(
        kind: CloudErrorKind,
        call: &'static str,
        group: &GroupRef,
        message: impl Into<String>,
    ) -> Self {
        CloudError {
            kind,
            call,
            group: group.to_string(),
            message: message.into(),
        }
    }
}

impl CloudError {
    /// A failed call about `subject` (a group, an image query), as its display renders it.
    pub fn about(
        kind: CloudErrorKind,
        call: &'static str,
        subject: &(impl fmt::Display + ?Sized),
        message: impl Into<String>,
    ) -> Self {
        CloudError {
            kind,
            call,
            group: subject.to_string(),
            message: message.into(),
        }
    }

    /// A failed image lookup, named by the query instead of a group.
    pub fn query(
        kind: CloudErrorKind,
        call: &'static str,
        query: &ImageQuery,
        message: impl Into<String>,
    ) -> Self {
        CloudError::about(kind, call, query, message)
    }
}

impl Classify for CloudError {
    fn classify(&self) -> Classified {
        self.kind.classify()
    }
}

/// The actuator of one or more cloud groups.
///
/// Contracts shared by all methods:
/// - Calls are safe to retry: each is idempotent in its effect as documented below, so that
///   an agent that crashed after sending a request and before recording its answer can send it
///   again.
/// - `NotFound` for the group means the group does not exist (deleted or misnamed); it is never
///   used for an instance inside an existing group except where stated.
/// - A provider applies its own timeout and bounded retry policy and returns the last error.
#[async_trait]
pub trait NodeGroups: Send + Sync {
    /// The group now: capacity bounds, template image and its live instances (terminated ones
    /// are omitted). Read-only. An instance the cloud has not managed to create carries the
    /// cause in `launch_error` where the cloud reports one per instance (GCP, Azure).
    async fn describe(&self, group: &GroupRef) -> Result<GroupState, CloudError>;

    /// Whether `image` can launch in the group now: it exists where the group launches and is
    /// ready there (AWS: `DescribeImages` in the group's region, state `available`, the pool's
    /// `arch`; GCP: `images.get` READY and not deprecated; Azure: the gallery image version
    /// succeeded and is replicated to the scale set's region). Read-only. An image that is
    /// missing or not ready is `Ok(Unusable)`, not an error; errors are for calls that failed.
    async fn check_image(
        &self,
        group: &GroupRef,
        image: &str,
        arch: Arch,
    ) -> Result<ImageCheck, CloudError>;

    /// The newest image `query` names (see [`ImageQuery`]), for `rota images discover`.
    /// Read-only. No such image (an empty family, a region without the parameter) is
    /// `NotFound`; an answer that is not an image (an SSM parameter holding something else)
    /// is `Invalid`. Providers that cannot look images up say so (the default).
    async fn find_image(&self, query: &ImageQuery) -> Result<FoundImage, CloudError> {
        Err(CloudError::query(
            CloudErrorKind::Invalid,
            "FindImage",
            query,
            "this provider cannot look images up",
        ))
    }

    /// Make instances created from now on boot `image`. Running instances are not touched.
    /// Idempotent: setting the image the template already has is a no-op success.
    async fn set_image(&self, group: &GroupRef, image: &str) -> Result<(), CloudError>;

    /// Set the desired capacity to `desired`. When `max` is given, set the maximum size to it
    /// first (rota raises it for a surge and restores it afterwards); without `max`, a desired
    /// value above the current maximum is `Invalid`, and so is one below the minimum size
    /// (nothing changes). Idempotent: the result is the same whether the call is made once or
    /// repeated. Where the cloud has no maximum of its own (a GCP managed instance group
    /// without an autoscaler, an Azure scale set), the provider documents where it keeps one
    /// (`gcp`: the autoscaler's bounds, else Compute's size limit; `azure`: the cluster
    /// autoscaler's `max` tag, else the platform limit).
    async fn set_capacity(
        &self,
        group: &GroupRef,
        desired: u32,
        max: Option<u32>,
    ) -> Result<(), CloudError>;

    /// Set the maximum size to `max` without touching the desired capacity, and never below
    /// the desired capacity the group holds at the moment of the call (the cloud's own value,
    /// read in the same call, not a describe the caller made earlier): rota restores the
    /// maximum after a rotation, and a desired capacity written back from a describe that
    /// lags behind a concurrent change (the cluster autoscaler's) would undo that change.
    async fn set_max(&self, group: &GroupRef, max: u32) -> Result<(), CloudError>;

    /// Terminate one instance. With `decrement`, the desired capacity goes down by one in the
    /// same call so the cloud does not replace it; when the desired capacity is already at
    /// the group's minimum size, a decrementing terminate is refused as `Invalid` and nothing
    /// changes (as AWS answers; the simulated cloud does the same; the GCP and Azure
    /// providers do not check a minimum yet, rota's controller never relies on the refusal). Idempotent: an instance that is already terminating or gone
    /// (or not a member of the group) is a success (and capacity is not decremented twice);
    /// `NotFound` only if the group is missing.
    async fn terminate(
        &self,
        group: &GroupRef,
        instance_id: &str,
        decrement: bool,
    ) -> Result<(), CloudError>;
}
