//! GCP managed instance groups (zonal and regional) behind [`NodeGroups`], through Google's
//! own Compute Engine client (`google-cloud-compute-v1`).
//!
//! What rota asks of a MIG, and the Compute calls that answer it:
//! - describe: `instanceGroupManagers.get` (target size, template, autoscaler),
//!   `autoscalers.get` when one targets the group (min/max), `instanceTemplates.get` (the boot
//!   image of the group's template and of each instance's), `listManagedInstances` (with
//!   each instance not created yet, the errors of its `lastAttempt`: a stock-out or a quota
//!   shortage shows there, not in the `resize` operation, which is DONE once scheduled).
//! - set_image: copy the current template under a name derived from group and image, with the
//!   new `sourceImage` on the boot disk (`instanceTemplates.insert`, global or regional as the
//!   current one is), then `setInstanceTemplate`. Templates are immutable in Compute.
//! - set_capacity: `autoscalers.patch` for the maximum, then `resize`.
//! - terminate: `deleteInstances` (which lowers the target size), and for `decrement = false`
//!   a `resize` back up so the group creates a replacement.
//!
//! Minimum and maximum: a MIG has only a target size. When an autoscaler targets the group
//! its `minNumReplicas`/`maxNumReplicas` are the bounds, and `set_capacity(max: Some)` patches
//! `maxNumReplicas` (rota needs such autoscalers in mode `OFF` and refuses to change the
//! image or the capacity of a group whose autoscaler acts, or whose update policy is
//! `PROACTIVE`). Without an autoscaler, min is 0 and max is Compute's hard limit
//! on a group's size (1,000 zonal, 2,000 regional); `max` in `set_capacity` then has nothing
//! to change and is ignored.
//!
//! Retries: every request runs under the shared [`RetryPolicy`]; the client library's own
//! retry loop is switched off (`NeverRetry`) so that exactly one policy applies. Two stacked
//! policies would multiply attempts (5 x 5) and hide throttling from rota's backoff.
//! Long-running operations are polled here with `*Operations.get` (each poll its own call
//! under the policy) rather than with the library's poller, which has its own backoff and
//! error policies. Mutations carry a `requestId` kept across retries of one call, so Compute
//! applies a retried request once.

pub mod classify;
pub mod inventory;
pub mod names;
pub mod node_pool_twin;
pub mod node_pools;

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use google_cloud_compute_v1::client::{
    Autoscalers, Images, InstanceGroupManagers, InstanceTemplates, RegionAutoscalers,
    RegionInstanceGroupManagers, RegionInstanceTemplates,
};
use google_cloud_compute_v1::model;
use google_cloud_gax::error::rpc::StatusDetails;
use google_cloud_gax::retry_policy::NeverRetry;

use super::provider_id;
use super::retry::RetryPolicy;
use super::{CloudError, CloudErrorKind, GroupRef, GroupState, Instance, Lifecycle, NodeGroups};
use names::TemplateRef;

/// Compute's limit on the size of a zonal MIG, the maximum when no autoscaler says less.
pub const ZONAL_MIG_LIMIT: u32 = 1000;
/// Compute's limit on the size of a regional MIG.
pub const REGIONAL_MIG_LIMIT: u32 = 2000;

/// How rota authenticates to Compute Engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum GcpCredentials {
    /// Application Default Credentials: on GKE with Workload Identity, the Google service
    /// account bound to the pod's Kubernetes service account; elsewhere
    /// `GOOGLE_APPLICATION_CREDENTIALS` or `gcloud auth application-default login`.
    #[default]
    ApplicationDefault,
    /// No credentials at all: for a local test double of the API only.
    Anonymous,
}

/// Settings of a [`GcpNodeGroups`].
#[derive(Clone, Debug)]
pub struct GcpOptions {
    /// The Compute API root, e.g. `http://127.0.0.1:8123` for a test double; `None` for
    /// `https://compute.googleapis.com`.
    pub endpoint: Option<String>,
    pub credentials: GcpCredentials,
    /// Retries and timeout of each request (polls included).
    pub retry: RetryPolicy,
    /// Pause between two polls of a running operation.
    pub poll_interval: Duration,
    /// How long one operation may run before the call gives up with `Transient` (the
    /// operation itself goes on in Compute; the retried call finds its effect).
    pub operation_timeout: Duration,
}

impl Default for GcpOptions {
    fn default() -> Self {
        GcpOptions {
            endpoint: None,
            credentials: GcpCredentials::ApplicationDefault,
            retry: RetryPolicy::default(),
            poll_interval: Duration::from_secs(2),
            operation_timeout: Duration::from_secs(300),
        }
    }
}

/// The Compute clients rota uses, one per service (each is a cheap handle).
#[derive(Clone, Debug)]
struct Clients {
    igm: InstanceGroupManagers,
    rigm: RegionInstanceGroupManagers,
    templates: InstanceTemplates,
    region_templates: RegionInstanceTemplates,
    autoscalers: Autoscalers,
    region_autoscalers: RegionAutoscalers,
    images: Images,
}

/// GCP managed instance groups as rota's [`NodeGroups`].
#[derive(Clone, Debug)]
pub struct GcpNodeGroups {
    clients: Clients,
    retry: RetryPolicy,
    poll_interval: Duration,
    operation_timeout: Duration,
}

/// Apply the settings every client shares: endpoint, credentials, and no retries of its own.
macro_rules! build_client {
    ($client:ty, $opts:expr, $creds:expr) => {{
        let mut b = <$client>::builder().with_retry_policy(NeverRetry);
        if let Some(e) = &$opts.endpoint {
            b = b.with_endpoint(e.clone());
        }
        b.with_credentials($creds.clone())
            .build()
            .await
            .with_context(|| format!("building the Compute client {}", stringify!($client)))?
    }};
}

impl GcpNodeGroups {
    /// Connect to Compute Engine. With [`GcpCredentials::ApplicationDefault`] this finds the
    /// credentials now (and fails here, not on the first call, when there are none).
    pub async fn new(options: GcpOptions) -> anyhow::Result<Self> {
        // The Google crates are built without a TLS crypto provider of their own (theirs is
        // aws-lc, a C build); they use the process default, which rota makes ring, the one
        // its other HTTPS clients use. An already installed default is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let creds = match options.credentials {
            GcpCredentials::ApplicationDefault => {
                google_cloud_auth::credentials::Builder::default()
                    .build()
                    .context("finding Google Application Default Credentials (on GKE: Workload Identity for rota's service account)")?
            }
            GcpCredentials::Anonymous => google_cloud_auth::credentials::anonymous::Builder::new().build(),
        };
        let clients = Clients {
            igm: build_client!(InstanceGroupManagers, options, creds),
            rigm: build_client!(RegionInstanceGroupManagers, options, creds),
            templates: build_client!(InstanceTemplates, options, creds),
            region_templates: build_client!(RegionInstanceTemplates, options, creds),
            autoscalers: build_client!(Autoscalers, options, creds),
            region_autoscalers: build_client!(RegionAutoscalers, options, creds),
            images: build_client!(Images, options, creds),
        };
        Ok(GcpNodeGroups {
            clients,
            retry: options.retry,
            poll_interval: options.poll_interval,
            operation_timeout: options.operation_timeout,
        })
    }
}

/// The permission `rota images discover` needs, on its own identity (a CI job's, where the
/// fleet repo is): the agents never look images up, so their role does not grant it.
pub const DISCOVERY_PERMISSIONS: &[(&str, &str)] =
    &[("images.getFromFamily", "compute.images.getFromFamily")];

/// The IAM permission each Compute method rota calls needs, as the API reference lists it on
/// the method's page. `deploy/components/gcp/rota-iam-role.yaml` grants exactly these (a test
/// holds it and this table to every call this module makes).
pub const PERMISSIONS: &[(&str, &str)] = &[
    ("images.get", "compute.images.get"),
    (
        "instanceGroupManagers.get",
        "compute.instanceGroupManagers.get",
    ),
    (
        "regionInstanceGroupManagers.get",
        "compute.instanceGroupManagers.get",
    ),
    (
        "instanceGroupManagers.listManagedInstances",
        "compute.instanceGroupManagers.get",
    ),
    (
        "regionInstanceGroupManagers.listManagedInstances",
        "compute.instanceGroupManagers.get",
    ),
    (
        "instanceGroupManagers.resize",
        "compute.instanceGroupManagers.update",
    ),
    (
        "regionInstanceGroupManagers.resize",
        "compute.instanceGroupManagers.update",
    ),
    (
        "instanceGroupManagers.setInstanceTemplate",
        "compute.instanceGroupManagers.update",
    ),
    (
        "instanceGroupManagers.setInstanceTemplate",
        "compute.instanceTemplates.useReadOnly",
    ),
    (
        "regionInstanceGroupManagers.setInstanceTemplate",
        "compute.instanceGroupManagers.update",
    ),
    (
        "regionInstanceGroupManagers.setInstanceTemplate",
        "compute.instanceTemplates.useReadOnly",
    ),
    (
        "instanceGroupManagers.deleteInstances",
        "compute.instanceGroupManagers.update",
    ),
    (
        "regionInstanceGroupManagers.deleteInstances",
        "compute.instanceGroupManagers.update",
    ),
    ("instanceTemplates.get", "compute.instanceTemplates.get"),
    (
        "regionInstanceTemplates.get",
        "compute.instanceTemplates.get",
    ),
    (
        "instanceTemplates.insert",
        "compute.instanceTemplates.create",
    ),
    ("instanceTemplates.insert", "compute.networks.get"),
    ("instanceTemplates.insert", "compute.subnetworks.get"),
    (
        "regionInstanceTemplates.insert",
        "compute.instanceTemplates.create",
    ),
    ("regionInstanceTemplates.insert", "compute.networks.get"),
    ("regionInstanceTemplates.insert", "compute.subnetworks.get"),
    ("autoscalers.get", "compute.autoscalers.get"),
    ("regionAutoscalers.get", "compute.autoscalers.get"),
    ("autoscalers.patch", "compute.autoscalers.update"),
    ("regionAutoscalers.patch", "compute.autoscalers.update"),
    ("zoneOperations.get", "compute.zoneOperations.get"),
    ("regionOperations.get", "compute.regionOperations.get"),
    ("globalOperations.get", "compute.globalOperations.get"),
];

/// Zonal or regional: the two halves of the Compute API rota addresses a MIG through.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Loc {
    Zone(String),
    Region(String),
}

/// A MIG as the API addresses it.
#[derive(Clone, Debug)]
struct Mig {
    project: String,
    name: String,
    loc: Loc,
}

impl Mig {
    fn of(call: &'static str, group: &GroupRef) -> Result<Mig, CloudError> {
        let GroupRef::Gcp {
            project,
            instance_group_manager,
            zone,
            region,
        } = group
        else {
            return Err(CloudError::new(
                CloudErrorKind::Invalid,
                call,
                group,
                "not a GCP group: the GCP provider manages managed instance groups only",
            ));
        };
        let loc = match (zone, region) {
            (Some(z), None) => Loc::Zone(z.clone()),
            (None, Some(r)) => Loc::Region(r.clone()),
            _ => {
                return Err(CloudError::new(
                    CloudErrorKind::Invalid,
                    call,
                    group,
                    "a GCP group needs exactly one of zone (zonal MIG) or region (regional MIG)",
                ));
            }
        };
        Ok(Mig {
            project: project.clone(),
            name: instance_group_manager.clone(),
            loc,
        })
    }

    fn regional(&self) -> bool {
        matches!(self.loc, Loc::Region(_))
    }

    fn limit(&self) -> u32 {
        if self.regional() {
            REGIONAL_MIG_LIMIT
        } else {
            ZONAL_MIG_LIMIT
        }
    }

    /// The Compute method name for a call on this MIG, for errors and logs.
    fn call(&self, zonal: &'static str, regional: &'static str) -> &'static str {
        if self.regional() { regional } else { zonal }
    }
}

/// Where an operation lives, and so which `*Operations.get` polls it.
#[derive(Clone, Debug)]
enum OpScope {
    Zone(String),
    Region(String),
    Global,
}

/// What rota reads off a MIG.
#[derive(Clone, Debug)]
struct MigView {
    target_size: u32,
    template: String,
    autoscaler: Option<String>,
    /// `updatePolicy.type`: `OPPORTUNISTIC` (only rota replaces instances) or `PROACTIVE`
    /// (Compute replaces them itself as soon as the template changes). Compute returns the
    /// policy of every group; rota refuses only a `PROACTIVE` it reads.
    update_policy: Option<String>,
}

/// A managed instance, as listed.
#[derive(Clone, Debug)]
struct Managed {
    name: String,
    url: String,
    zone: String,
    template: Option<String>,
    lifecycle: Lifecycle,
    /// The errors of its last creation attempt, for an instance not created yet.
    launch_error: Option<super::LaunchError>,
}

/// A refused request as a [`CloudError`], classified by HTTP status and Google error reasons.
fn api_error(
    call: &'static str,
    group: &(impl std::fmt::Display + ?Sized),
    e: &google_cloud_gax::error::Error,
) -> CloudError {
    let reasons: Vec<String> = e
        .status()
        .map(|s| {
            s.details
                .iter()
                .filter_map(|d| match d {
                    StatusDetails::ErrorInfo(i) if !i.reason.is_empty() => Some(i.reason.clone()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let refs: Vec<&str> = reasons.iter().map(String::as_str).collect();
    // The google.rpc code, as `error.status` names it (`Unknown` when the body had none).
    let rpc_code = e
        .status()
        .map(|s| String::from(s.code))
        .filter(|c| c != "UNKNOWN");
    let mut kind = classify::classify_rpc(e.http_status_code(), rpc_code.as_deref(), &refs);
    if e.is_authentication() {
        // No token could be had: a metadata-server blip heals, missing credentials do not.
        let transient = std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<google_cloud_gax::error::CredentialsError>())
            .is_some_and(|c| c.is_transient());
        kind = if transient {
            CloudErrorKind::Transient
        } else {
            CloudErrorKind::Permission
        };
    }
    let message = match (e.status(), e.http_status_code()) {
        (Some(s), Some(code)) => {
            let why = if reasons.is_empty() {
                String::new()
            } else {
                format!(" [{}]", reasons.join(", "))
            };
            format!("HTTP {code}{why}: {}", s.message)
        }
        _ => e.to_string(),
    };
    // `group` names what the call was about: a group, or an image query.
    CloudError::about(kind, call, group, message)
}

/// The image's architecture when it says one and it is not `arch` (an image that names none
/// boots either).
fn other_arch(img: &google_cloud_compute_v1::model::Image, arch: super::Arch) -> Option<&str> {
    let found = img.architecture.as_ref().and_then(|a| a.name())?;
    let wanted = match arch {
        super::Arch::X86_64 => "X86_64",
        super::Arch::Arm64 => "ARM64",
    };
    (!found.is_empty() && found != "ARCHITECTURE_UNSPECIFIED" && found != wanted).then_some(found)
}

/// The outcome of an operation that is `DONE`.
fn operation_result(
    call: &'static str,
    group: &GroupRef,
    op: &model::Operation,
) -> Result<(), CloudError> {
    let Some(err) = op.error.as_ref().filter(|e| !e.errors.is_empty()) else {
        return Ok(());
    };
    let codes: Vec<&str> = err
        .errors
        .iter()
        .filter_map(|e| e.code.as_deref())
        .collect();
    let status = op
        .http_error_status_code
        .and_then(|s| u16::try_from(s).ok());
    let kind = classify::classify_operation(&codes, status);
    let detail: Vec<String> = err
        .errors
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e.code.as_deref().unwrap_or("?"),
                e.message.as_deref().unwrap_or("")
            )
        })
        .collect();
    Err(CloudError::new(
        kind,
        call,
        group,
        format!(
            "operation {} failed: {}",
            op.name.as_deref().unwrap_or("?"),
            detail.join("; ")
        ),
    ))
}

/// What the last attempt to create `mi` failed with (`lastAttempt.errors`), if anything:
/// how a stock-out or a quota shortage shows once `resize` is DONE.
fn launch_error(mi: &model::ManagedInstance) -> Option<super::LaunchError> {
    let errors = &mi.last_attempt.as_ref()?.errors.as_ref()?.errors;
    if errors.is_empty() {
        return None;
    }
    let codes: Vec<&str> = errors.iter().filter_map(|e| e.code.as_deref()).collect();
    Some(super::LaunchError {
        kind: classify::classify_launch(&codes),
        code: codes.first().copied().unwrap_or("UNKNOWN").to_string(),
        message: errors
            .iter()
            .filter_map(|e| e.message.as_deref())
            .collect::<Vec<_>>()
            .join("; "),
    })
}

/// Refuse a group whose update policy would have Compute replace running instances itself
/// once the template changes (`PROACTIVE`): the nodes would go without a drain. Azure's
/// provider refuses the same case (an upgrade policy other than Manual).
fn check_update_policy(
    call: &'static str,
    group: &GroupRef,
    view: &MigView,
) -> Result<(), CloudError> {
    match view.update_policy.as_deref() {
        Some("PROACTIVE") => Err(CloudError::new(
            CloudErrorKind::Invalid,
            call,
            group,
            "updatePolicy.type is PROACTIVE: a new instance template would have Compute replace the running instances itself, without draining their nodes; rota rotates nodes itself and needs updatePolicy.type OPPORTUNISTIC (GKE's default)",
        )),
        _ => Ok(()),
    }
}

/// Refuse a group whose autoscaler acts on it (mode `ON`, `ONLY_SCALE_OUT`, `ONLY_UP`): it
/// would resize the group against the surge and its undoing, and Compute refuses manual
/// resizes of an autoscaled group. rota needs the autoscaler `OFF` (its bounds are then the
/// group's minimum and maximum) or no autoscaler at all.
fn check_autoscaler_mode(
    call: &'static str,
    group: &GroupRef,
    autoscaler: Option<&model::Autoscaler>,
) -> Result<(), CloudError> {
    let Some(a) = autoscaler else {
        return Ok(());
    };
    let mode = a
        .autoscaling_policy
        .as_ref()
        .and_then(|p| p.mode.as_ref())
        .and_then(|m| m.name())
        // The API reference: a policy without a mode is ON.
        .unwrap_or("ON");
    if mode == "OFF" {
        return Ok(());
    }
    Err(CloudError::new(
        CloudErrorKind::Invalid,
        call,
        group,
        format!(
            "autoscaler {} is in mode {mode}: it would resize the group against the rotation's surge (and Compute refuses manual resizes while it acts); rota needs the autoscaler's mode OFF (its minNumReplicas and maxNumReplicas stay the group's bounds) or no autoscaler",
            a.name.as_deref().unwrap_or("?")
        ),
    ))
}

/// The image the template's boot disk is created from.
fn boot_image(t: &model::InstanceTemplate) -> Option<&str> {
    let disks = &t.properties.as_ref()?.disks;
    let boot = disks
        .iter()
        .find(|d| d.boot == Some(true))
        .or_else(|| disks.first())?;
    boot.initialize_params.as_ref()?.source_image.as_deref()
}

/// A copy of `current` named `name` whose boot disk is created from `image`; `None` when the
/// template has no boot disk created from an image (nothing rota could change).
fn with_image(
    current: &model::InstanceTemplate,
    name: &str,
    image: &str,
    group: &GroupRef,
) -> Option<model::InstanceTemplate> {
    let mut t = current.clone();
    let props = t.properties.as_mut()?;
    let at =
        props
            .disks
            .iter()
            .position(|d| d.boot == Some(true))
            .or(if props.disks.is_empty() {
                None
            } else {
                Some(0)
            })?;
    props.disks[at].initialize_params.as_mut()?.source_image = Some(image.to_string());
    t.name = Some(name.to_string());
    t.description = Some(format!(
        "rota: {} with boot image {image} (copied from {})",
        group,
        current.name.as_deref().unwrap_or("?")
    ));
    // Output-only fields of the source: Compute sets them for the new one.
    t.id = None;
    t.self_link = None;
    t.creation_timestamp = None;
    t.kind = None;
    Some(t)
}

impl GcpNodeGroups {
    /// One request under the retry policy.
    async fn call<T, F, Fut>(
        &self,
        call: &'static str,
        group: &GroupRef,
        mut f: F,
    ) -> Result<T, CloudError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, google_cloud_gax::error::Error>>,
    {
        self.retry
            .run(call, group, || {
                let fut = f();
                async move { fut.await.map_err(|e| api_error(call, group, &e)) }
            })
            .await
    }

    /// Poll `op` until it is `DONE`, then report its own outcome.
    async fn wait(
        &self,
        call: &'static str,
        group: &GroupRef,
        project: &str,
        scope: &OpScope,
        mut op: model::Operation,
    ) -> Result<(), CloudError> {
        let started = tokio::time::Instant::now();
        loop {
            let status = op
                .status
                .as_ref()
                .and_then(|s| s.name())
                .unwrap_or("PENDING");
            if status == "DONE" {
                return operation_result(call, group, &op);
            }
            let name = op.name.clone().ok_or_else(|| {
                CloudError::new(
                    CloudErrorKind::Transient,
                    call,
                    group,
                    "Compute returned an operation without a name",
                )
            })?;
            if started.elapsed() >= self.operation_timeout {
                return Err(CloudError::new(
                    CloudErrorKind::Transient,
                    call,
                    group,
                    format!(
                        "operation {name} still {status} after {:?}",
                        self.operation_timeout
                    ),
                ));
            }
            tokio::time::sleep(self.poll_interval).await;
            let c = &self.clients;
            op = match scope {
                OpScope::Zone(z) => {
                    self.call("zoneOperations.get", group, || {
                        c.igm
                            .get_operation()
                            .set_project(project)
                            .set_zone(z)
                            .set_operation(&name)
                            .send()
                    })
                    .await?
                }
                OpScope::Region(r) => {
                    self.call("regionOperations.get", group, || {
                        c.rigm
                            .get_operation()
                            .set_project(project)
                            .set_region(r)
                            .set_operation(&name)
                            .send()
                    })
                    .await?
                }
                OpScope::Global => {
                    self.call("globalOperations.get", group, || {
                        c.templates
                            .get_operation()
                            .set_project(project)
                            .set_operation(&name)
                            .send()
                    })
                    .await?
                }
            };
        }
    }

    fn mig_scope(mig: &Mig) -> OpScope {
        match &mig.loc {
            Loc::Zone(z) => OpScope::Zone(z.clone()),
            Loc::Region(r) => OpScope::Region(r.clone()),
        }
    }

    async fn get_mig(&self, mig: &Mig, group: &GroupRef) -> Result<MigView, CloudError> {
        let c = &self.clients;
        let (p, n) = (&mig.project, &mig.name);
        let m: model::InstanceGroupManager = match &mig.loc {
            Loc::Zone(z) => {
                self.call("instanceGroupManagers.get", group, || {
                    c.igm
                        .get()
                        .set_project(p)
                        .set_zone(z)
                        .set_instance_group_manager(n)
                        .send()
                })
                .await?
            }
            Loc::Region(r) => {
                self.call("regionInstanceGroupManagers.get", group, || {
                    c.rigm
                        .get()
                        .set_project(p)
                        .set_region(r)
                        .set_instance_group_manager(n)
                        .send()
                })
                .await?
            }
        };
        // A group in a canary split has several versions; the template new instances get is
        // the top-level one (setInstanceTemplate sets it and drops the split).
        let template = m
            .instance_template
            .clone()
            .or_else(|| m.versions.first().and_then(|v| v.instance_template.clone()))
            .ok_or_else(|| {
                CloudError::new(
                    CloudErrorKind::Invalid,
                    mig.call(
                        "instanceGroupManagers.get",
                        "regionInstanceGroupManagers.get",
                    ),
                    group,
                    "the group has no instance template",
                )
            })?;
        Ok(MigView {
            target_size: m.target_size.unwrap_or(0).max(0) as u32,
            update_policy: m
                .update_policy
                .as_ref()
                .and_then(|u| u.r#type.as_ref())
                .and_then(|t| t.name())
                .map(str::to_string),
            template,
            autoscaler: m
                .status
                .and_then(|s| s.autoscaler)
                .filter(|a| !a.is_empty()),
        })
    }

    async fn list_managed(&self, mig: &Mig, group: &GroupRef) -> Result<Vec<Managed>, CloudError> {
        let c = &self.clients;
        let (p, n) = (&mig.project, &mig.name);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page: model::InstanceGroupManagersListManagedInstancesResponse = match &mig.loc {
                Loc::Zone(z) => {
                    self.call("instanceGroupManagers.listManagedInstances", group, || {
                        c.igm
                            .list_managed_instances()
                            .set_project(p)
                            .set_zone(z)
                            .set_instance_group_manager(n)
                            .set_or_clear_page_token(token.clone())
                            .send()
                    })
                    .await?
                }
                Loc::Region(r) => {
                    // The regional call answers with its own response type; same fields.
                    let r: model::RegionInstanceGroupManagersListInstancesResponse = self
                        .call(
                            "regionInstanceGroupManagers.listManagedInstances",
                            group,
                            || {
                                c.rigm
                                    .list_managed_instances()
                                    .set_project(p)
                                    .set_region(r)
                                    .set_instance_group_manager(n)
                                    .set_or_clear_page_token(token.clone())
                                    .send()
                            },
                        )
                        .await?;
                    model::InstanceGroupManagersListManagedInstancesResponse::new()
                        .set_managed_instances(r.managed_instances)
                        .set_or_clear_next_page_token(r.next_page_token)
                }
            };
            for mi in page.managed_instances {
                let Some(url) = mi.instance.clone() else {
                    continue;
                };
                let lifecycle = names::lifecycle(
                    mi.current_action.as_ref().and_then(|a| a.name()),
                    mi.instance_status.as_ref().and_then(|s| s.name()),
                );
                let launch_error = (lifecycle == Lifecycle::Pending)
                    .then(|| launch_error(&mi))
                    .flatten();
                let name = mi
                    .name
                    .clone()
                    .unwrap_or_else(|| names::last_segment(&url).to_string());
                let zone = names::segment_after(&url, "zones")
                    .unwrap_or_default()
                    .to_string();
                out.push(Managed {
                    lifecycle,
                    launch_error,
                    template: mi.version.and_then(|v| v.instance_template),
                    name,
                    url,
                    zone,
                });
            }
            match page.next_page_token.filter(|t| !t.is_empty()) {
                Some(t) => token = Some(t),
                None => return Ok(out),
            }
        }
    }

    async fn get_template(
        &self,
        t: &TemplateRef,
        group: &GroupRef,
    ) -> Result<model::InstanceTemplate, CloudError> {
        let c = &self.clients;
        match &t.region {
            None => {
                self.call("instanceTemplates.get", group, || {
                    c.templates
                        .get()
                        .set_project(&t.project)
                        .set_instance_template(&t.name)
                        .send()
                })
                .await
            }
            Some(r) => {
                self.call("regionInstanceTemplates.get", group, || {
                    c.region_templates
                        .get()
                        .set_project(&t.project)
                        .set_region(r)
                        .set_instance_template(&t.name)
                        .send()
                })
                .await
            }
        }
    }

    /// The boot image of the template at `url`, through `cache` (one read per template).
    async fn template_image(
        &self,
        url: &str,
        group: &GroupRef,
        cache: &mut HashMap<String, String>,
    ) -> Result<String, CloudError> {
        if let Some(i) = cache.get(url) {
            return Ok(i.clone());
        }
        let t = TemplateRef::parse(url).ok_or_else(|| {
            CloudError::new(
                CloudErrorKind::Invalid,
                "instanceTemplates.get",
                group,
                format!("unrecognised instance template URL {url:?}"),
            )
        })?;
        let image = match self.get_template(&t, group).await {
            Ok(tpl) => boot_image(&tpl)
                .map(|i| names::partial(i).to_string())
                .unwrap_or_else(|| format!("unknown (template {} has no boot image)", t.name)),
            // Instances may outlive a template rota no longer uses; their image is unknown,
            // which rota treats as "not the target" (so they are rotated), never as a missing
            // group.
            Err(e) if e.kind == CloudErrorKind::NotFound => {
                format!("unknown (template {} deleted)", t.name)
            }
            Err(e) => return Err(e),
        };
        cache.insert(url.to_string(), image.clone());
        Ok(image)
    }

    /// `(min, max)` of the group: its autoscaler's bounds, or 0 and Compute's size limit.
    async fn bounds(
        &self,
        mig: &Mig,
        view: &MigView,
        group: &GroupRef,
    ) -> Result<(u32, u32, Option<model::Autoscaler>), CloudError> {
        let Some(url) = &view.autoscaler else {
            return Ok((0, mig.limit(), None));
        };
        let a = self
            .get_autoscaler(mig, names::last_segment(url), group)
            .await?;
        let policy = a.autoscaling_policy.clone().unwrap_or_default();
        let min = policy.min_num_replicas.unwrap_or(0).max(0) as u32;
        let max = policy
            .max_num_replicas
            .map_or(mig.limit(), |m| m.max(0) as u32);
        Ok((min, max, Some(a)))
    }

    async fn get_autoscaler(
        &self,
        mig: &Mig,
        name: &str,
        group: &GroupRef,
    ) -> Result<model::Autoscaler, CloudError> {
        let c = &self.clients;
        let p = &mig.project;
        match &mig.loc {
            Loc::Zone(z) => {
                self.call("autoscalers.get", group, || {
                    c.autoscalers
                        .get()
                        .set_project(p)
                        .set_zone(z)
                        .set_autoscaler(name)
                        .send()
                })
                .await
            }
            Loc::Region(r) => {
                self.call("regionAutoscalers.get", group, || {
                    c.region_autoscalers
                        .get()
                        .set_project(p)
                        .set_region(r)
                        .set_autoscaler(name)
                        .send()
                })
                .await
            }
        }
    }

    async fn set_autoscaler_max(
        &self,
        mig: &Mig,
        mut a: model::Autoscaler,
        max: u32,
        group: &GroupRef,
    ) -> Result<(), CloudError> {
        let c = &self.clients;
        let p = &mig.project;
        let name = a.name.clone().unwrap_or_default();
        let mut policy = a.autoscaling_policy.take().unwrap_or_default();
        policy.max_num_replicas = Some(max as i32);
        // Only the policy is sent: PATCH merges it into the autoscaler.
        let body = model::Autoscaler::new()
            .set_name(name.clone())
            .set_autoscaling_policy(policy);
        let rid = names::request_id();
        let call = mig.call("autoscalers.patch", "regionAutoscalers.patch");
        let op = match &mig.loc {
            Loc::Zone(z) => {
                self.call(call, group, || {
                    c.autoscalers
                        .patch()
                        .set_project(p)
                        .set_zone(z)
                        .set_autoscaler(&name)
                        .set_body(body.clone())
                        .set_request_id(&rid)
                        .send()
                })
                .await?
            }
            Loc::Region(r) => {
                self.call(call, group, || {
                    c.region_autoscalers
                        .patch()
                        .set_project(p)
                        .set_region(r)
                        .set_autoscaler(&name)
                        .set_body(body.clone())
                        .set_request_id(&rid)
                        .send()
                })
                .await?
            }
        };
        self.wait(call, group, p, &Self::mig_scope(mig), op).await
    }

    async fn resize(&self, mig: &Mig, size: u32, group: &GroupRef) -> Result<(), CloudError> {
        let c = &self.clients;
        let (p, n) = (&mig.project, &mig.name);
        let rid = names::request_id();
        let call = mig.call(
            "instanceGroupManagers.resize",
            "regionInstanceGroupManagers.resize",
        );
        let op = match &mig.loc {
            Loc::Zone(z) => {
                self.call(call, group, || {
                    c.igm
                        .resize()
                        .set_project(p)
                        .set_zone(z)
                        .set_instance_group_manager(n)
                        .set_size(size as i32)
                        .set_request_id(&rid)
                        .send()
                })
                .await?
            }
            Loc::Region(r) => {
                self.call(call, group, || {
                    c.rigm
                        .resize()
                        .set_project(p)
                        .set_region(r)
                        .set_instance_group_manager(n)
                        .set_size(size as i32)
                        .set_request_id(&rid)
                        .send()
                })
                .await?
            }
        };
        self.wait(call, group, p, &Self::mig_scope(mig), op).await
    }

    /// Create `t` (global or regional as `at` says) and wait; an existing one of that name is
    /// fine (a concurrent or earlier attempt made it; the caller checks its image).
    async fn insert_template(
        &self,
        at: &TemplateRef,
        t: model::InstanceTemplate,
        group: &GroupRef,
    ) -> Result<(), CloudError> {
        let c = &self.clients;
        let p = &at.project;
        let rid = names::request_id();
        let (call, scope) = match &at.region {
            None => ("instanceTemplates.insert", OpScope::Global),
            Some(r) => ("regionInstanceTemplates.insert", OpScope::Region(r.clone())),
        };
        let sent = match &at.region {
            None => {
                self.call(call, group, || {
                    c.templates
                        .insert()
                        .set_project(p)
                        .set_body(t.clone())
                        .set_request_id(&rid)
                        .send()
                })
                .await
            }
            Some(r) => {
                self.call(call, group, || {
                    c.region_templates
                        .insert()
                        .set_project(p)
                        .set_region(r)
                        .set_body(t.clone())
                        .set_request_id(&rid)
                        .send()
                })
                .await
            }
        };
        match sent {
            Ok(op) => self.wait(call, group, p, &scope, op).await,
            Err(e) if e.message.contains("alreadyExists") => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn set_template(
        &self,
        mig: &Mig,
        template: &TemplateRef,
        group: &GroupRef,
    ) -> Result<(), CloudError> {
        let c = &self.clients;
        let (p, n) = (&mig.project, &mig.name);
        let rid = names::request_id();
        let path = template.path();
        let call = mig.call(
            "instanceGroupManagers.setInstanceTemplate",
            "regionInstanceGroupManagers.setInstanceTemplate",
        );
        let op = match &mig.loc {
            Loc::Zone(z) => {
                let body = model::InstanceGroupManagersSetInstanceTemplateRequest::new()
                    .set_instance_template(path.clone());
                self.call(call, group, || {
                    c.igm
                        .set_instance_template()
                        .set_project(p)
                        .set_zone(z)
                        .set_instance_group_manager(n)
                        .set_body(body.clone())
                        .set_request_id(&rid)
                        .send()
                })
                .await?
            }
            Loc::Region(r) => {
                let body = model::RegionInstanceGroupManagersSetTemplateRequest::new()
                    .set_instance_template(path.clone());
                self.call(call, group, || {
                    c.rigm
                        .set_instance_template()
                        .set_project(p)
                        .set_region(r)
                        .set_instance_group_manager(n)
                        .set_body(body.clone())
                        .set_request_id(&rid)
                        .send()
                })
                .await?
            }
        };
        self.wait(call, group, p, &Self::mig_scope(mig), op).await
    }

    async fn delete_instance(
        &self,
        mig: &Mig,
        url: &str,
        group: &GroupRef,
    ) -> Result<(), CloudError> {
        let c = &self.clients;
        let (p, n) = (&mig.project, &mig.name);
        let rid = names::request_id();
        let instance = names::partial(url).to_string();
        let call = mig.call(
            "instanceGroupManagers.deleteInstances",
            "regionInstanceGroupManagers.deleteInstances",
        );
        // skipInstancesOnValidationError: an instance already deleting or gone (a retry after
        // a lost answer) is skipped instead of failing the call, and not counted twice.
        let op = match &mig.loc {
            Loc::Zone(z) => {
                let body = model::InstanceGroupManagersDeleteInstancesRequest::new()
                    .set_instances([instance.clone()])
                    .set_skip_instances_on_validation_error(true);
                self.call(call, group, || {
                    c.igm
                        .delete_instances()
                        .set_project(p)
                        .set_zone(z)
                        .set_instance_group_manager(n)
                        .set_body(body.clone())
                        .set_request_id(&rid)
                        .send()
                })
                .await?
            }
            Loc::Region(r) => {
                let body = model::RegionInstanceGroupManagersDeleteInstancesRequest::new()
                    .set_instances([instance.clone()])
                    .set_skip_instances_on_validation_error(true);
                self.call(call, group, || {
                    c.rigm
                        .delete_instances()
                        .set_project(p)
                        .set_region(r)
                        .set_instance_group_manager(n)
                        .set_body(body.clone())
                        .set_request_id(&rid)
                        .send()
                })
                .await?
            }
        };
        self.wait(call, group, p, &Self::mig_scope(mig), op).await
    }
}

#[async_trait]
impl NodeGroups for GcpNodeGroups {
    async fn describe(&self, group: &GroupRef) -> Result<GroupState, CloudError> {
        let mig = Mig::of("instanceGroupManagers.get", group)?;
        let view = self.get_mig(&mig, group).await?;
        let (min, max, _) = self.bounds(&mig, &view, group).await?;
        let mut cache = HashMap::new();
        let template_image = self
            .template_image(&view.template, group, &mut cache)
            .await?;
        let mut instances = Vec::new();
        for m in self.list_managed(&mig, group).await? {
            // An instance still being created may not report its version yet: it is being
            // created from the group's current template.
            let template = m.template.as_deref().unwrap_or(&view.template);
            let image = self.template_image(template, group, &mut cache).await?;
            instances.push(Instance {
                provider_id: provider_id::gcp(&mig.project, &m.zone, &m.name),
                id: m.name,
                image,
                zone: m.zone,
                lifecycle: m.lifecycle,
                launch_error: m.launch_error,
            });
        }
        Ok(GroupState {
            group: group.clone(),
            desired: view.target_size,
            min,
            max,
            template_image,
            instances,
        })
    }

    async fn find_image(&self, query: &super::ImageQuery) -> Result<super::FoundImage, CloudError> {
        const CALL: &str = "images.getFromFamily";
        let super::ImageQuery::GcpFamily {
            project,
            family,
            arch,
        } = query
        else {
            return Err(CloudError::query(
                CloudErrorKind::Invalid,
                "FindImage",
                query,
                "not a GCP image source",
            ));
        };
        let fail = |kind, message: String| CloudError::query(kind, CALL, query, message);
        let c = &self.clients;
        let got = self
            .retry
            .run(CALL, query, || {
                let fut = c
                    .images
                    .get_from_family()
                    .set_project(project)
                    .set_family(family)
                    .send();
                async move { fut.await.map_err(|e| api_error(CALL, query, &e)) }
            })
            .await;
        // Compute answers the family's newest image that is not deprecated, or 404.
        let img = match got {
            Ok(img) => img,
            Err(mut e) if e.kind == CloudErrorKind::NotFound => {
                e.message = format!(
                    "image family {project}/{family} has no image that is not deprecated: {}",
                    e.message
                );
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        let name = img.name.clone().unwrap_or_default();
        let status = img.status.as_ref().and_then(|s| s.name()).unwrap_or("");
        if status != "READY" {
            return Err(fail(
                CloudErrorKind::NotFound,
                format!(
                    "image family {project}/{family}: its newest image {name} is {status}, not READY"
                ),
            ));
        }
        if let Some(found) = other_arch(&img, *arch) {
            return Err(fail(
                CloudErrorKind::Invalid,
                format!(
                    "image family {project}/{family}: its newest image {name} is {found}, not {arch}"
                ),
            ));
        }
        let created = img
            .creation_timestamp
            .as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&chrono::Utc))
            .ok_or_else(|| {
                fail(
                    CloudErrorKind::Invalid,
                    format!("image {name} has no creationTimestamp in RFC 3339"),
                )
            })?;
        Ok(super::FoundImage {
            id: format!("projects/{project}/global/images/{name}"),
            name,
            created,
        })
    }

    async fn check_image(
        &self,
        group: &GroupRef,
        image: &str,
        arch: super::Arch,
    ) -> Result<super::ImageCheck, CloudError> {
        use super::ImageCheck;
        Mig::of("images.get", group)?;
        // `projects/P/global/images/NAME` (or a full URL ending so). A family reference
        // (`…/images/family/F`) is resolved by Compute at insert and not checked here.
        let path = image.split("/projects/").last().unwrap_or(image);
        let path = path.strip_prefix("projects/").unwrap_or(path);
        let parts: Vec<&str> = path.split('/').collect();
        let (project, name) = match parts.as_slice() {
            [p, "global", "images", n] => (*p, *n),
            [_, "global", "images", "family", _] => return Ok(ImageCheck::Usable),
            _ => {
                return Ok(ImageCheck::unusable(
                    "ImageNotFound",
                    format!(
                        "{image:?} is not a Compute image path (projects/P/global/images/NAME)"
                    ),
                ));
            }
        };
        let c = &self.clients;
        let got = self
            .call("images.get", group, || {
                c.images.get().set_project(project).set_image(name).send()
            })
            .await;
        let img = match got {
            Ok(img) => img,
            Err(e) if e.kind == CloudErrorKind::NotFound => {
                return Ok(ImageCheck::unusable(
                    "ImageNotFound",
                    format!("image {image} was not found: {}", e.message),
                ));
            }
            Err(e) => return Err(e),
        };
        let status = img.status.as_ref().and_then(|s| s.name()).unwrap_or("");
        if status != "READY" {
            return Ok(ImageCheck::unusable(
                "ImageNotReady",
                format!("image {image} is {status}, not READY"),
            ));
        }
        let deprecation = img
            .deprecated
            .as_ref()
            .and_then(|d| d.state.as_ref())
            .and_then(|s| s.name())
            .unwrap_or("");
        if matches!(deprecation, "DEPRECATED" | "OBSOLETE" | "DELETED") {
            return Ok(ImageCheck::unusable(
                "ImageDeprecated",
                format!("image {image} is {deprecation}"),
            ));
        }
        if let Some(found) = other_arch(&img, arch) {
            return Ok(ImageCheck::unusable(
                "ImageWrongArch",
                format!("image {image} is {found} and the pool is {arch}"),
            ));
        }
        Ok(ImageCheck::Usable)
    }

    async fn set_image(&self, group: &GroupRef, image: &str) -> Result<(), CloudError> {
        let mig = Mig::of("instanceGroupManagers.get", group)?;
        let view = self.get_mig(&mig, group).await?;
        let invalid =
            |call, msg: String| CloudError::new(CloudErrorKind::Invalid, call, group, msg);
        let current = TemplateRef::parse(&view.template).ok_or_else(|| {
            invalid(
                "instanceTemplates.get",
                format!("unrecognised instance template URL {:?}", view.template),
            )
        })?;
        let tpl = match self.get_template(&current, group).await {
            Err(e) if e.kind == CloudErrorKind::NotFound => {
                // Never report the group missing for its template: that means "no group".
                return Err(invalid(
                    e.call,
                    format!(
                        "the group's template {} is missing: {}",
                        current.name, e.message
                    ),
                ));
            }
            r => r?,
        };
        if boot_image(&tpl).is_some_and(|i| names::same_image(i, image)) {
            return Ok(());
        }
        // Nothing is written to a group that would fight the rotation.
        let call = mig.call(
            "instanceGroupManagers.setInstanceTemplate",
            "regionInstanceGroupManagers.setInstanceTemplate",
        );
        check_update_policy(call, group, &view)?;
        let (_, _, autoscaler) = self.bounds(&mig, &view, group).await?;
        check_autoscaler_mode(call, group, autoscaler.as_ref())?;
        let target = current.sibling(names::template_name(&mig.name, image));
        match self.get_template(&target, group).await {
            Ok(existing) => {
                // Made by an earlier attempt of this call (same name = same group and image).
                if !boot_image(&existing).is_some_and(|i| names::same_image(i, image)) {
                    return Err(invalid(
                        "instanceTemplates.get",
                        format!(
                            "template {} exists but does not boot {image}; rota will not reuse it",
                            target.name
                        ),
                    ));
                }
            }
            Err(e) if e.kind == CloudErrorKind::NotFound => {
                let copy = with_image(&tpl, &target.name, image, group).ok_or_else(|| {
                    invalid(
                        "instanceTemplates.insert",
                        format!(
                            "template {} has no boot disk created from an image",
                            current.name
                        ),
                    )
                })?;
                self.insert_template(&target, copy, group).await?;
            }
            Err(e) => return Err(e),
        }
        self.set_template(&mig, &target, group).await
    }

    async fn set_capacity(
        &self,
        group: &GroupRef,
        desired: u32,
        max: Option<u32>,
    ) -> Result<(), CloudError> {
        let mig = Mig::of("instanceGroupManagers.resize", group)?;
        let view = self.get_mig(&mig, group).await?;
        let (_, current_max, autoscaler) = self.bounds(&mig, &view, group).await?;
        let call = mig.call(
            "instanceGroupManagers.resize",
            "regionInstanceGroupManagers.resize",
        );
        check_autoscaler_mode(call, group, autoscaler.as_ref())?;
        let bound = match (max, autoscaler) {
            (Some(m), Some(a)) => {
                if m != current_max {
                    self.set_autoscaler_max(&mig, a, m, group).await?;
                }
                m
            }
            // No autoscaler: no maximum to raise; Compute's own limit is the bound.
            (Some(m), None) => m.min(mig.limit()),
            (None, _) => current_max,
        };
        if desired > bound {
            return Err(CloudError::new(
                CloudErrorKind::Invalid,
                call,
                group,
                format!("desired capacity {desired} is above the group's maximum {bound}"),
            ));
        }
        if view.target_size == desired {
            return Ok(());
        }
        self.resize(&mig, desired, group).await
    }

    async fn set_max(&self, group: &GroupRef, max: u32) -> Result<(), CloudError> {
        let mig = Mig::of("autoscalers.patch", group)?;
        let view = self.get_mig(&mig, group).await?;
        let (_, current_max, autoscaler) = self.bounds(&mig, &view, group).await?;
        // Without an autoscaler a managed instance group has no maximum of its own (Compute's
        // limit is the bound): nothing to restore. The target size is never written here.
        let Some(a) = autoscaler else {
            return Ok(());
        };
        let max = max.max(view.target_size);
        if max == current_max {
            return Ok(());
        }
        self.set_autoscaler_max(&mig, a, max, group).await
    }

    async fn terminate(
        &self,
        group: &GroupRef,
        instance_id: &str,
        decrement: bool,
    ) -> Result<(), CloudError> {
        let mig = Mig::of("instanceGroupManagers.deleteInstances", group)?;
        let view = self.get_mig(&mig, group).await?;
        let managed = self.list_managed(&mig, group).await?;
        let Some(victim) = managed.iter().find(|m| m.name == instance_id) else {
            // Gone already (or never in this group): nothing to do, capacity untouched.
            return Ok(());
        };
        if victim.lifecycle == Lifecycle::Terminating {
            // Already being deleted (an earlier attempt, or the group itself): its effect on
            // capacity has happened; doing it again would lower the target size twice.
            return Ok(());
        }
        self.delete_instance(&mig, &victim.url, group).await?;
        if !decrement {
            // deleteInstances always lowers the target size; put it back so the group creates
            // a replacement from its current template.
            self.resize(&mig, view.target_size, group).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The Compute method names this module passes as `call`.
    fn calls_made() -> BTreeSet<String> {
        let services = [
            "instanceGroupManagers",
            "regionInstanceGroupManagers",
            "instanceTemplates",
            "regionInstanceTemplates",
            "autoscalers",
            "regionAutoscalers",
            "zoneOperations",
            "regionOperations",
            "globalOperations",
            "images",
        ];
        // The code, without the table itself.
        let src = include_str!("mod.rs");
        let table = src.find("pub const PERMISSIONS").unwrap();
        let end = table + src[table..].find("];").unwrap();
        let code = format!("{}{}", &src[..table], &src[end..]);
        code.split('"')
            .skip(1)
            .step_by(2)
            .filter(|lit| {
                lit.split_once('.').is_some_and(|(svc, m)| {
                    services.contains(&svc)
                        && !m.is_empty()
                        && m.chars().all(|c| c.is_ascii_alphabetic())
                })
            })
            .map(String::from)
            .collect::<BTreeSet<String>>()
    }

    #[test]
    fn every_call_has_its_permission_and_the_role_grants_exactly_those() {
        let calls = calls_made();
        assert!(calls.len() >= 20, "{calls:?}");
        for c in &calls {
            assert!(
                PERMISSIONS
                    .iter()
                    .chain(DISCOVERY_PERMISSIONS)
                    .any(|(call, _)| call == c),
                "no permission listed for {c}"
            );
        }
        let needed: BTreeSet<&str> = PERMISSIONS.iter().map(|(_, p)| *p).collect();
        let role = include_str!("../../../deploy/components/gcp/rota-iam-role.yaml");
        let granted: BTreeSet<&str> = role
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- "))
            .map(str::trim)
            .collect();
        assert_eq!(granted, needed, "the custom role and the table differ");
    }

    #[test]
    fn groups_address_one_location() {
        let g = |zone: Option<&str>, region: Option<&str>| GroupRef::Gcp {
            project: "p".into(),
            instance_group_manager: "m".into(),
            zone: zone.map(Into::into),
            region: region.map(Into::into),
        };
        assert_eq!(
            Mig::of("x", &g(Some("z"), None)).unwrap().loc,
            Loc::Zone("z".into())
        );
        assert_eq!(
            Mig::of("x", &g(None, Some("r"))).unwrap().loc,
            Loc::Region("r".into())
        );
        for bad in [g(None, None), g(Some("z"), Some("r"))] {
            let e = Mig::of("instanceGroupManagers.get", &bad).unwrap_err();
            assert_eq!(e.kind, CloudErrorKind::Invalid);
            assert!(e.message.contains("exactly one of zone"), "{e}");
        }
        let aws = GroupRef::Aws {
            region: "r".into(),
            auto_scaling_group: "a".into(),
        };
        assert_eq!(
            Mig::of("x", &aws).unwrap_err().kind,
            CloudErrorKind::Invalid
        );
    }

    #[test]
    fn failed_operations_name_their_codes() {
        let op: model::Operation = serde_json::from_value(serde_json::json!({
            "name": "operation-1", "status": "DONE", "httpErrorStatusCode": 403,
            "error": {"errors": [{"code": "QUOTA_EXCEEDED", "message": "Quota 'CPUS' exceeded."}]}
        }))
        .unwrap();
        let g = GroupRef::Gcp {
            project: "p".into(),
            instance_group_manager: "m".into(),
            zone: Some("z".into()),
            region: None,
        };
        let e = operation_result("instanceGroupManagers.resize", &g, &op).unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Quota);
        assert!(
            e.to_string()
                .contains("QUOTA_EXCEEDED: Quota 'CPUS' exceeded."),
            "{e}"
        );
        let ok: model::Operation =
            serde_json::from_value(serde_json::json!({"name": "o", "status": "DONE"})).unwrap();
        assert!(operation_result("x", &g, &ok).is_ok());
    }
}
