//! Azure: a pool's machines are a virtual machine scale set (Uniform orchestration, upgrade
//! policy Manual), driven through the Azure Resource Manager REST API.
//!
//! | `NodeGroups` | ARM calls (api-version 2024-07-01) |
//! |---|---|
//! | `describe` | `VirtualMachineScaleSets_Get`, `VirtualMachineScaleSetVMs_List` (all pages), `VirtualMachineScaleSetVMs_Get` with the instance view for a VM whose provisioning failed |
//! | `check_image` | `VirtualMachineScaleSets_Get` (its location), `GalleryImageVersions_Get` with `$expand=ReplicationStatus` (api-version 2023-07-03): provisioning succeeded, the location among the target regions and replicated there |
//! | `find_image` (`rota images discover`) | `GalleryImageVersions_ListByGalleryImage` (api-version 2023-07-03, `nextLink` followed): the newest version by `publishedDate` that succeeded, is not `excludeFromLatest`, and targets every region asked |
//! | `set_image` | `VirtualMachineScaleSets_Get`, `VirtualMachineScaleSets_Update` (the model's `imageReference`, same publisher and offer), wait |
//! | `set_capacity` | `VirtualMachineScaleSets_Get`, `VirtualMachineScaleSets_Update` (`sku.capacity`, the `max` tag; `If-Match`), wait |
//! | `terminate` | `VirtualMachineScaleSets_Get`, `VirtualMachineScaleSetVMs_Get`, `VirtualMachineScaleSets_DeleteInstances`, wait; without `decrement`, `VirtualMachineScaleSets_Update` to put the capacity back |
//!
//! Capacity bounds: a scale set has a capacity but no minimum or maximum of its own. rota
//! reads and writes them as the scale set's `min` and `max` tags, the ones the Kubernetes
//! cluster autoscaler's Azure auto-discovery enforces; without a tag the bounds are 0 and the
//! platform's limit for a scale set ([`PLATFORM_MAX`]). `set_capacity(.., Some(max))` writes the
//! `max` tag in the same update as the capacity (and writes nothing for the platform limit
//! when no tag exists, so a surge that restores "no maximum" leaves no tag behind).
//!
//! Images are one string: a gallery (or managed) image ID, a `/SharedGalleries/…` or
//! `/CommunityGalleries/…` ID, or a marketplace URN `publisher:offer:sku:version`
//! ([`model::ImageReference`]). See `docs/cloud-azure.md` for credentials and the role.

pub mod agent_pool_twin;
pub mod agent_pools;
pub mod arm;
pub mod classify;
pub mod inventory;
pub mod model;
pub mod transport;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use azure_core::credentials::TokenCredential;
use azure_core::http::{ClientOptions, Method, RetryOptions, Transport};
use serde_json::json;

use self::arm::{ARM_ENDPOINT, Arm, LroOptions};
use self::classify::instance_already_gone;
use self::model::{ImageReference, ScaleSet, ScaleSetVm, VmPage, same_image};
use self::transport::HyperTransport;
use super::retry::RetryPolicy;
use super::{
    CloudError, CloudErrorKind, GroupRef, GroupState, Instance, Lifecycle, NodeGroups, provider_id,
};

/// The compute API version rota speaks (its bodies are what the double in `tests/` serves).
pub const API_VERSION: &str = "2024-07-01";
/// The Compute Gallery API version of the gallery image version read (galleries version their
/// API apart from compute).
pub const GALLERY_API_VERSION: &str = "2023-07-03";

/// An ARM location as a key: `West Europe` and `westeurope` are the same region.
fn location_key(l: &str) -> String {
    l.chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether a gallery image version (a `GalleryImageVersion` body with its replication status)
/// can launch in `location`.
/// The newest version of a gallery image that `rota images discover` may propose, from
/// `GalleryImageVersions_ListByGalleryImage` pages (`value` arrays): provisioning succeeded,
/// not `excludeFromLatest`, every one of `regions` among its target regions; newest by
/// `publishingProfile.publishedDate`. `Err` says why there is none.
pub fn latest_gallery_version(
    gallery_image: &str,
    versions: &[serde_json::Value],
    regions: &[String],
) -> Result<super::FoundImage, String> {
    let wanted: Vec<String> = regions.iter().map(|r| location_key(r)).collect();
    let mut best: Option<super::FoundImage> = None;
    for v in versions {
        let props = &v["properties"];
        let profile = &props["publishingProfile"];
        let ok = props["provisioningState"]
            .as_str()
            .is_some_and(|s| s.eq_ignore_ascii_case("Succeeded"))
            && !profile["excludeFromLatest"].as_bool().unwrap_or(false);
        let targets: Vec<String> = profile["targetRegions"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|r| r["name"].as_str())
                    .map(location_key)
                    .collect()
            })
            .unwrap_or_default();
        let (Some(id), Some(name), Some(published)) = (
            v["id"].as_str(),
            v["name"].as_str(),
            profile["publishedDate"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()),
        ) else {
            continue;
        };
        if !ok || !wanted.iter().all(|w| targets.contains(w)) {
            continue;
        }
        let published = published.with_timezone(&chrono::Utc);
        if best.as_ref().is_none_or(|b| published > b.created) {
            best = Some(super::FoundImage {
                id: id.to_string(),
                name: name.to_string(),
                created: published,
            });
        }
    }
    best.ok_or_else(|| {
        format!(
            "gallery image {gallery_image} has no succeeded version, not excluded from latest, replicated to {} ({} versions listed)",
            if regions.is_empty() { "its regions".to_string() } else { regions.join(", ") },
            versions.len()
        )
    })
}

pub fn gallery_version_check(
    image: &str,
    location: &str,
    v: &serde_json::Value,
) -> super::ImageCheck {
    use super::ImageCheck;
    let props = &v["properties"];
    let state = props["provisioningState"].as_str().unwrap_or("");
    if !state.eq_ignore_ascii_case("Succeeded") {
        return ImageCheck::unusable(
            "ImageNotReady",
            format!("gallery image version {image} is {state}, not Succeeded"),
        );
    }
    let here = location_key(location);
    let targets: Vec<&str> = props["publishingProfile"]["targetRegions"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["name"].as_str()).collect())
        .unwrap_or_default();
    if !targets.iter().any(|t| location_key(t) == here) {
        return ImageCheck::unusable(
            "ImageNotReplicated",
            format!(
                "gallery image version {image} is not replicated to {location} (its target regions: {})",
                targets.join(", ")
            ),
        );
    }
    let replicated = props["replicationStatus"]["summary"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|r| r["region"].as_str().map(location_key) == Some(here.clone()))
        })
        .and_then(|r| r["state"].as_str());
    match replicated {
        Some(s) if !s.eq_ignore_ascii_case("Completed") => ImageCheck::unusable(
            "ImageNotReady",
            format!("gallery image version {image} is {s} in {location}"),
        ),
        _ => ImageCheck::Usable,
    }
}

/// A scale set's instance limit with platform or gallery images (Uniform orchestration).
pub const PLATFORM_MAX: u32 = 1000;

/// The tags that hold the bounds, as the cluster autoscaler's Azure auto-discovery reads them.
pub const MIN_TAG: &str = "min";
pub const MAX_TAG: &str = "max";

const GET_SCALE_SET: &str = "VirtualMachineScaleSets_Get";
const LIST_VMS: &str = "VirtualMachineScaleSetVMs_List";
const GET_VM: &str = "VirtualMachineScaleSetVMs_Get";
const UPDATE_SCALE_SET: &str = "VirtualMachineScaleSets_Update";
const DELETE_INSTANCES: &str = "VirtualMachineScaleSets_DeleteInstances";

/// How to reach ARM and how patiently.
#[derive(Clone, Debug)]
pub struct AzureOptions {
    /// `https://management.azure.com` (or a sovereign cloud's ARM endpoint).
    pub endpoint: String,
    pub retry: RetryPolicy,
    pub lro: LroOptions,
}

impl Default for AzureOptions {
    fn default() -> Self {
        AzureOptions {
            endpoint: ARM_ENDPOINT.to_string(),
            retry: RetryPolicy::default(),
            lro: LroOptions::default(),
        }
    }
}

/// The credential of a pod with Microsoft Entra Workload ID: the webhook sets
/// `AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE` (and
/// `AZURE_AUTHORITY_HOST`), and the credential trades the projected service account token for
/// an Entra token. Its token requests use rota's transport, without SDK retries.
pub fn workload_identity() -> Result<Arc<dyn TokenCredential>, String> {
    let transport = HyperTransport::new()?;
    let credential_options = azure_identity::WorkloadIdentityCredentialOptions {
        credential_options: azure_identity::ClientAssertionCredentialOptions {
            client_options: ClientOptions {
                transport: Some(Transport::new(Arc::new(transport))),
                retry: RetryOptions::none(),
                ..Default::default()
            },
        },
        ..Default::default()
    };
    let credential = azure_identity::WorkloadIdentityCredential::new(Some(credential_options))
        .map_err(|e| format!("Azure workload identity: {e}"))?;
    Ok(credential)
}

/// [`NodeGroups`] over Azure virtual machine scale sets.
#[derive(Clone)]
pub struct AzureNodeGroups {
    arm: Arm,
}

impl AzureNodeGroups {
    /// A provider that authenticates with `credential` (any `azure_core` token credential).
    pub fn new(
        credential: Arc<dyn TokenCredential>,
        options: AzureOptions,
    ) -> Result<Self, String> {
        let transport = HyperTransport::new()?;
        let arm = Arm::new(
            credential,
            transport,
            &options.endpoint,
            options.retry,
            options.lro,
        )?;
        Ok(AzureNodeGroups { arm })
    }

    /// The provider for a pod with Microsoft Entra Workload ID: the webhook sets
    /// `AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE` (and
    /// `AZURE_AUTHORITY_HOST`), and the credential trades the projected service account token
    /// for an Entra token. Its token requests use the same transport, without SDK retries.
    pub fn with_workload_identity(options: AzureOptions) -> Result<Self, String> {
        Self::new(workload_identity()?, options)
    }

    fn scale_set_path(&self, group: &GroupRef, call: &'static str) -> Result<String, CloudError> {
        let GroupRef::Azure {
            subscription_id,
            resource_group,
            scale_set,
        } = group
        else {
            return Err(CloudError::new(
                CloudErrorKind::Invalid,
                call,
                group,
                "not an Azure scale set: the Azure provider only drives azure groups",
            ));
        };
        for (what, v) in [
            ("subscriptionId", subscription_id),
            ("resourceGroup", resource_group),
            ("scaleSet", scale_set),
        ] {
            if !valid_name(v) {
                return Err(CloudError::new(
                    CloudErrorKind::Invalid,
                    call,
                    group,
                    format!("{what} {v:?} is not a valid Azure resource name"),
                ));
            }
        }
        Ok(format!(
            "/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/Microsoft.Compute/virtualMachineScaleSets/{scale_set}"
        ))
    }

    async fn get_scale_set(
        &self,
        group: &GroupRef,
        call: &'static str,
    ) -> Result<(String, ScaleSet), CloudError> {
        let path = self.scale_set_path(group, call)?;
        let url = self.arm.url(&format!("{path}?api-version={API_VERSION}"));
        let vmss: ScaleSet = self.arm.get_json(call, group, &url).await?;
        if let Some(mode) = &vmss.properties.orchestration_mode
            && !mode.eq_ignore_ascii_case("Uniform")
        {
            return Err(CloudError::new(
                CloudErrorKind::Invalid,
                call,
                group,
                format!(
                    "orchestration mode {mode}: rota drives Uniform scale sets (the kind AKS and cluster-api make)"
                ),
            ));
        }
        Ok((path, vmss))
    }

    async fn list_vms(&self, group: &GroupRef, path: &str) -> Result<Vec<ScaleSetVm>, CloudError> {
        let mut url = self
            .arm
            .url(&format!("{path}/virtualMachines?api-version={API_VERSION}"));
        let mut vms = Vec::new();
        // A bound on pages: a scale set holds at most 1000 instances, ARM pages hold dozens.
        for _ in 0..1000 {
            let page: VmPage = self.arm.get_json(LIST_VMS, group, &url).await?;
            vms.extend(page.value);
            match page.next_link.filter(|l| !l.is_empty()) {
                Some(link) => url = self.arm.follow(&link, LIST_VMS, group)?,
                None => return Ok(vms),
            }
        }
        Err(CloudError::new(
            CloudErrorKind::Invalid,
            LIST_VMS,
            group,
            "more than 1000 pages of instances: ARM's nextLink does not end",
        ))
    }

    /// Why the VM's provisioning failed, from its instance view (`ProvisioningState/failed/
    /// {code}`): the one extra read rota makes, and only for a VM whose provisioning failed.
    /// `None` when the VM is gone by now.
    async fn provisioning_failure(
        &self,
        group: &GroupRef,
        path: &str,
        instance_id: &str,
    ) -> Result<Option<super::LaunchError>, CloudError> {
        if !valid_name(instance_id) {
            return Ok(None);
        }
        let url = self.arm.url(&format!(
            "{path}/virtualMachines/{instance_id}?$expand=instanceView&api-version={API_VERSION}"
        ));
        let reply = self
            .arm
            .send(GET_VM, group, Method::Get, &url, None, None)
            .await?;
        if reply.status == 404 {
            return Ok(None);
        }
        if !reply.ok() {
            return Err(reply.to_error(GET_VM, group));
        }
        let vm: ScaleSetVm = reply.json(GET_VM, group)?;
        Ok(Some(launch_error(&vm)))
    }

    /// PATCH the scale set and wait for the operation.
    async fn update(
        &self,
        group: &GroupRef,
        path: &str,
        body: serde_json::Value,
        etag: Option<&str>,
    ) -> Result<UpdateOutcome, CloudError> {
        let url = self.arm.url(&format!("{path}?api-version={API_VERSION}"));
        let reply = self
            .arm
            .send(
                UPDATE_SCALE_SET,
                group,
                Method::Patch,
                &url,
                Some(&body),
                etag,
            )
            .await?;
        if reply.status == 412 {
            return Ok(UpdateOutcome::StaleEtag);
        }
        if !reply.ok() {
            return Err(reply.to_error(UPDATE_SCALE_SET, group));
        }
        self.arm.wait(UPDATE_SCALE_SET, group, &reply, &url).await?;
        Ok(UpdateOutcome::Done)
    }

    /// Bring the capacity (and the `max` tag) to the wanted values: read, check, write with
    /// `If-Match`, again from the read if someone else wrote in between.
    /// Write the capacity (`None`: keep the one read in the same round, under its ETag, so
    /// that a maximum-only change cannot undo a concurrent resize) and the maximum tag.
    async fn apply_capacity(
        &self,
        group: &GroupRef,
        desired: Option<u32>,
        max: Option<u32>,
        call: &'static str,
    ) -> Result<(), CloudError> {
        for _ in 0..5 {
            let (path, vmss) = self.get_scale_set(group, call).await?;
            let current = u32::try_from(vmss.sku.capacity.unwrap_or(0)).unwrap_or(u32::MAX);
            let (desired, max) = match desired {
                Some(d) => (d, max),
                None => (current, max.map(|m| m.max(current))),
            };
            let bounds = bounds(&vmss.tags).map_err(|m| {
                CloudError::new(CloudErrorKind::Invalid, UPDATE_SCALE_SET, group, m)
            })?;
            let plan = capacity_plan(
                vmss.sku.capacity.unwrap_or(0),
                &vmss.tags,
                bounds,
                desired,
                max,
            )
            .map_err(|m| CloudError::new(CloudErrorKind::Invalid, UPDATE_SCALE_SET, group, m))?;
            let Some(body) = plan else {
                return Ok(());
            };
            match self
                .update(group, &path, body, vmss.etag.as_deref())
                .await?
            {
                UpdateOutcome::Done => return Ok(()),
                UpdateOutcome::StaleEtag => continue,
            }
        }
        Err(CloudError::new(
            CloudErrorKind::Transient,
            UPDATE_SCALE_SET,
            group,
            "the scale set kept changing between read and write (HTTP 412 five times)",
        ))
    }
}

enum UpdateOutcome {
    Done,
    StaleEtag,
}

/// Resource names as ARM paths carry them: no separators, no query characters.
fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 90
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '(' | ')'))
}

/// `(min, max)` from the scale set's tags; a tag that is not a number is an error naming it.
pub fn bounds(tags: &BTreeMap<String, String>) -> Result<(u32, u32), String> {
    let read = |name: &str, default: u32| -> Result<u32, String> {
        match tag(tags, name) {
            None => Ok(default),
            Some(v) => v.trim().parse::<u32>().map_err(|_| {
                format!("the scale set's {name:?} tag is {v:?}, not a number of instances")
            }),
        }
    };
    Ok((read(MIN_TAG, 0)?, read(MAX_TAG, PLATFORM_MAX)?))
}

/// Tag keys are case-insensitive in Azure.
fn tag<'a>(tags: &'a BTreeMap<String, String>, name: &str) -> Option<&'a String> {
    tags.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
}

/// What `set_capacity` must PATCH, if anything: `Ok(None)` when the scale set already has
/// the wanted capacity and maximum; an error for a capacity above the maximum.
pub fn capacity_plan(
    capacity: u64,
    tags: &BTreeMap<String, String>,
    (_min, max_now): (u32, u32),
    desired: u32,
    max: Option<u32>,
) -> Result<Option<serde_json::Value>, String> {
    let limit = max.unwrap_or(max_now);
    if desired > limit {
        return Err(match max {
            Some(m) => format!("desired capacity {desired} is above the maximum {m} asked for"),
            None => format!(
                "desired capacity {desired} is above the scale set's maximum {max_now} (its {MAX_TAG:?} tag, or the platform limit); raise it with the max argument"
            ),
        });
    }
    let tags_change = match max {
        None => None,
        Some(m) => {
            let same = match tag(tags, MAX_TAG) {
                Some(v) => v.trim() == m.to_string(),
                None => m == PLATFORM_MAX,
            };
            (!same).then(|| {
                // Tags are written whole: keep every other tag, replace the `max` one.
                let mut t: BTreeMap<String, String> = tags
                    .iter()
                    .filter(|(k, _)| !k.eq_ignore_ascii_case(MAX_TAG))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                t.insert(MAX_TAG.to_string(), m.to_string());
                t
            })
        }
    };
    if capacity == u64::from(desired) && tags_change.is_none() {
        return Ok(None);
    }
    let mut body = json!({ "sku": { "capacity": desired } });
    if let Some(t) = tags_change {
        body["tags"] = json!(t);
    }
    Ok(Some(body))
}

/// Whether a VM's provisioning failed (`provisioningState` `Failed`).
pub fn is_failed(provisioning_state: Option<&str>) -> bool {
    provisioning_state.is_some_and(|s| s.eq_ignore_ascii_case("failed"))
}

/// A VM whose provisioning failed, as a launch error: the code of its instance view's
/// `ProvisioningState/failed/{code}` status (`AllocationFailed`, `OSProvisioningTimedOut`,
/// `VMExtensionProvisioningError`...), classified as the same code in a failed operation
/// (an allocation failure is `Quota`: Azure does not retry a failed VM, the planner pauses
/// the pool on it).
pub fn launch_error(vm: &ScaleSetVm) -> super::LaunchError {
    let failed = vm
        .properties
        .instance_view
        .as_ref()
        .into_iter()
        .flat_map(|v| &v.statuses)
        .find_map(|st| {
            const PREFIX: &str = "ProvisioningState/failed/";
            let code = st.code.as_deref()?;
            let head = code.get(..PREFIX.len())?;
            head.eq_ignore_ascii_case(PREFIX)
                .then(|| (code[PREFIX.len()..].to_string(), st))
        });
    match failed {
        Some((code, st)) => {
            let message = st
                .message
                .clone()
                .or_else(|| st.display_status.clone())
                .unwrap_or_default();
            super::LaunchError {
                kind: classify::classify(None, &code, &message),
                code,
                message,
            }
        }
        None => super::LaunchError {
            kind: CloudErrorKind::Transient,
            code: "ProvisioningFailed".into(),
            message: "the VM's provisioningState is Failed and its instance view names no cause"
                .into(),
        },
    }
}

/// Where a VM is in its life, from its `provisioningState`.
pub fn lifecycle(provisioning_state: Option<&str>) -> Lifecycle {
    match provisioning_state
        .map(|s| s.to_ascii_lowercase())
        .as_deref()
    {
        Some("creating") => Lifecycle::Pending,
        Some("deleting") => Lifecycle::Terminating,
        // Succeeded, Updating, Migrating; also Failed: the VM exists and counts against
        // capacity, and its node may still come up (a failed extension fails provisioning
        // of a running VM). `describe` names the failure in the instance's `launch_error`,
        // which the planner acts on while no Ready node shows for it.
        _ => Lifecycle::InService,
    }
}

/// The zone as Kubernetes labels it on Azure (`westeurope-1`); empty for a regional VM.
fn zone(vm: &ScaleSetVm) -> String {
    match vm.zones.first() {
        Some(z) if !vm.location.is_empty() => format!("{}-{z}", vm.location.to_ascii_lowercase()),
        Some(z) => z.clone(),
        None => String::new(),
    }
}

fn template_image(vmss: &ScaleSet) -> Option<String> {
    vmss.properties
        .virtual_machine_profile
        .as_ref()?
        .storage_profile
        .as_ref()?
        .image_reference
        .as_ref()?
        .render()
}

#[async_trait]
impl NodeGroups for AzureNodeGroups {
    async fn describe(&self, group: &GroupRef) -> Result<GroupState, CloudError> {
        let (path, vmss) = self.get_scale_set(group, GET_SCALE_SET).await?;
        let invalid = |m: String| CloudError::new(CloudErrorKind::Invalid, GET_SCALE_SET, group, m);
        let (min, max) = bounds(&vmss.tags).map_err(invalid)?;
        let template = template_image(&vmss).ok_or_else(|| {
            invalid("the scale set's model has no imageReference rota can name".to_string())
        })?;
        let GroupRef::Azure {
            subscription_id,
            resource_group,
            scale_set,
        } = group
        else {
            unreachable!("scale_set_path accepted only Azure groups");
        };
        let mut vms = self.list_vms(group, &path).await?;
        let mut failures = BTreeMap::new();
        for vm in &vms {
            if is_failed(vm.properties.provisioning_state.as_deref())
                && let Some(e) = self
                    .provisioning_failure(group, &path, &vm.instance_id)
                    .await?
            {
                failures.insert(vm.instance_id.clone(), e);
            }
        }
        let instances = std::mem::take(&mut vms)
            .into_iter()
            .map(|vm| Instance {
                launch_error: failures.remove(&vm.instance_id),
                provider_id: provider_id::azure(
                    subscription_id,
                    resource_group,
                    scale_set,
                    &vm.instance_id,
                ),
                image: vm
                    .properties
                    .storage_profile
                    .as_ref()
                    .and_then(|s| s.image_reference.as_ref())
                    .and_then(ImageReference::render)
                    .unwrap_or_default(),
                zone: zone(&vm),
                lifecycle: lifecycle(vm.properties.provisioning_state.as_deref()),
                id: vm.instance_id,
            })
            .collect();
        Ok(GroupState {
            group: group.clone(),
            desired: u32::try_from(vmss.sku.capacity.unwrap_or(0)).unwrap_or(u32::MAX),
            min,
            max,
            template_image: template,
            instances,
        })
    }

    async fn find_image(&self, query: &super::ImageQuery) -> Result<super::FoundImage, CloudError> {
        const CALL: &str = "GalleryImageVersions_ListByGalleryImage";
        let super::ImageQuery::AzureGallery {
            gallery_image,
            regions,
            ..
        } = query
        else {
            return Err(CloudError::query(
                CloudErrorKind::Invalid,
                "FindImage",
                query,
                "not an Azure image source",
            ));
        };
        let mut url = self.arm.url(&format!(
            "{gallery_image}/versions?api-version={GALLERY_API_VERSION}"
        ));
        let mut versions = Vec::new();
        // A bound on pages, as for instances: ARM's nextLink must end.
        for _ in 0..1000 {
            let page: serde_json::Value = self.arm.get_json(CALL, query, &url).await?;
            versions.extend(page["value"].as_array().cloned().unwrap_or_default());
            match page["nextLink"].as_str().filter(|l| !l.is_empty()) {
                Some(link) => url = self.arm.follow(link, CALL, query)?,
                None => {
                    return latest_gallery_version(gallery_image, &versions, regions)
                        .map_err(|m| CloudError::query(CloudErrorKind::NotFound, CALL, query, m));
                }
            }
        }
        Err(CloudError::query(
            CloudErrorKind::Invalid,
            CALL,
            query,
            "more than 1000 pages of versions: ARM's nextLink does not end",
        ))
    }

    async fn check_image(
        &self,
        group: &GroupRef,
        image: &str,
        _arch: super::Arch,
    ) -> Result<super::ImageCheck, CloudError> {
        // Only a gallery image version of a subscription is read here; marketplace URNs and
        // shared or community gallery IDs are resolved by the platform at create.
        let lower = image.to_ascii_lowercase();
        if !(lower.starts_with("/subscriptions/")
            && lower.contains("/galleries/")
            && lower.contains("/versions/"))
        {
            return Ok(super::ImageCheck::Usable);
        }
        let (_, vmss) = self
            .get_scale_set(group, "VirtualMachineScaleSets_Get")
            .await?;
        const CALL: &str = "GalleryImageVersions_Get";
        let url = self.arm.url(&format!(
            "{image}?$expand=ReplicationStatus&api-version={GALLERY_API_VERSION}"
        ));
        match self
            .arm
            .get_json::<serde_json::Value>(CALL, group, &url)
            .await
        {
            Ok(v) => Ok(gallery_version_check(image, &vmss.location, &v)),
            Err(e) if e.kind == CloudErrorKind::NotFound => Ok(super::ImageCheck::unusable(
                "ImageNotFound",
                format!("gallery image version {image} was not found: {}", e.message),
            )),
            Err(e) => Err(e),
        }
    }

    async fn set_image(&self, group: &GroupRef, image: &str) -> Result<(), CloudError> {
        // The group first: a missing group is NotFound whatever the image says.
        let (path, vmss) = self.get_scale_set(group, GET_SCALE_SET).await?;
        let wanted = ImageReference::parse(image)
            .map_err(|m| CloudError::new(CloudErrorKind::Invalid, UPDATE_SCALE_SET, group, m))?;
        if template_image(&vmss).is_some_and(|t| same_image(&t, image)) {
            return Ok(());
        }
        let mode = vmss
            .properties
            .upgrade_policy
            .as_ref()
            .and_then(|u| u.mode.clone())
            .unwrap_or_else(|| "Manual".to_string());
        let current = vmss
            .properties
            .virtual_machine_profile
            .as_ref()
            .and_then(|p| p.storage_profile.as_ref())
            .and_then(|s| s.image_reference.clone())
            .unwrap_or_default();
        if let Some(why) = model::form_change(&current, &wanted) {
            return Err(CloudError::new(
                CloudErrorKind::Invalid,
                UPDATE_SCALE_SET,
                group,
                why,
            ));
        }
        if !mode.eq_ignore_ascii_case("Manual") {
            return Err(CloudError::new(
                CloudErrorKind::Invalid,
                UPDATE_SCALE_SET,
                group,
                format!(
                    "upgrade policy is {mode}: a new image in the model would be rolled onto running instances; rota rotates nodes itself and needs upgradePolicy.mode Manual"
                ),
            ));
        }
        let body = json!({
            "properties": { "virtualMachineProfile": { "storageProfile": {
                "imageReference": wanted.patch_value()
            } } }
        });
        // No If-Match: the image is one field, written whole; a concurrent writer of the
        // same field is a second rota, which would write the same image.
        match self.update(group, &path, body, None).await? {
            UpdateOutcome::Done | UpdateOutcome::StaleEtag => Ok(()),
        }
    }

    async fn set_capacity(
        &self,
        group: &GroupRef,
        desired: u32,
        max: Option<u32>,
    ) -> Result<(), CloudError> {
        self.apply_capacity(group, Some(desired), max, GET_SCALE_SET)
            .await
    }

    async fn set_max(&self, group: &GroupRef, max: u32) -> Result<(), CloudError> {
        self.apply_capacity(group, None, Some(max), GET_SCALE_SET)
            .await
    }

    async fn terminate(
        &self,
        group: &GroupRef,
        instance_id: &str,
        decrement: bool,
    ) -> Result<(), CloudError> {
        let (path, vmss) = self.get_scale_set(group, GET_SCALE_SET).await?;
        let capacity_before = vmss.sku.capacity.unwrap_or(0);
        if !valid_name(instance_id) {
            // Not a name ARM could hold, so no such instance: gone is success.
            return Ok(());
        }
        let vm_url = self.arm.url(&format!(
            "{path}/virtualMachines/{instance_id}?api-version={API_VERSION}"
        ));
        let reply = self
            .arm
            .send(GET_VM, group, Method::Get, &vm_url, None, None)
            .await?;
        if reply.status == 404 {
            return Ok(()); // already gone (the scale set itself was there a moment ago)
        }
        if !reply.ok() {
            return Err(reply.to_error(GET_VM, group));
        }
        let vm: ScaleSetVm = reply.json(GET_VM, group)?;
        if lifecycle(vm.properties.provisioning_state.as_deref()) == Lifecycle::Terminating {
            return Ok(()); // already being deleted: do not ask twice (or lower capacity twice)
        }
        let url = self
            .arm
            .url(&format!("{path}/delete?api-version={API_VERSION}"));
        let body = json!({ "instanceIds": [instance_id] });
        let reply = self
            .arm
            .send(
                DELETE_INSTANCES,
                group,
                Method::Post,
                &url,
                Some(&body),
                None,
            )
            .await?;
        if !reply.ok() {
            let (code, message) = reply.arm_error();
            if instance_already_gone(&code, &message) {
                return Ok(());
            }
            return Err(reply.to_error(DELETE_INSTANCES, group));
        }
        // Deleting instances lowers the scale set's capacity by as many: that is `decrement`.
        let scale_set = self.arm.url(&format!("{path}?api-version={API_VERSION}"));
        self.arm
            .wait(DELETE_INSTANCES, group, &reply, &scale_set)
            .await?;
        if !decrement {
            // Put the capacity back so the scale set creates a replacement (on the current
            // model's image). Not raised past what it was, so a repeat cannot surge.
            let (_, after) = self.get_scale_set(group, GET_SCALE_SET).await?;
            if after.sku.capacity.unwrap_or(0) < capacity_before {
                let desired = u32::try_from(capacity_before).unwrap_or(u32::MAX);
                self.apply_capacity(group, Some(desired), None, GET_SCALE_SET)
                    .await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn bounds_come_from_the_autoscaler_tags_or_the_platform() {
        assert_eq!(bounds(&tags(&[])).unwrap(), (0, PLATFORM_MAX));
        assert_eq!(
            bounds(&tags(&[("min", "1"), ("Max", "8")])).unwrap(),
            (1, 8)
        );
        let e = bounds(&tags(&[("max", "lots")])).unwrap_err();
        assert!(e.contains("\"max\"") && e.contains("lots"), "{e}");
    }

    #[test]
    fn capacity_plan_checks_the_maximum_and_writes_only_what_changes() {
        let t = tags(&[("max", "2"), ("team", "infra")]);
        assert!(capacity_plan(2, &t, (0, 2), 3, None).is_err());
        assert_eq!(capacity_plan(2, &t, (0, 2), 2, None).unwrap(), None);
        assert_eq!(capacity_plan(2, &t, (0, 2), 2, Some(2)).unwrap(), None);
        let body = capacity_plan(2, &t, (0, 2), 3, Some(3)).unwrap().unwrap();
        assert_eq!(body["sku"]["capacity"], 3);
        assert_eq!(body["tags"]["max"], "3");
        assert_eq!(body["tags"]["team"], "infra", "other tags are kept");
        let body = capacity_plan(2, &t, (0, 2), 1, None).unwrap().unwrap();
        assert!(body.get("tags").is_none());
        // No tag and the platform limit asked for: nothing to write.
        assert_eq!(
            capacity_plan(3, &tags(&[]), (0, PLATFORM_MAX), 3, Some(PLATFORM_MAX)).unwrap(),
            None
        );
        assert!(capacity_plan(3, &t, (0, 2), 4, Some(3)).is_err());
    }

    #[test]
    fn provisioning_states_map_to_lifecycles() {
        assert_eq!(lifecycle(Some("Creating")), Lifecycle::Pending);
        assert_eq!(lifecycle(Some("Succeeded")), Lifecycle::InService);
        assert_eq!(lifecycle(Some("Updating")), Lifecycle::InService);
        assert_eq!(lifecycle(Some("Failed")), Lifecycle::InService);
        assert_eq!(lifecycle(Some("Deleting")), Lifecycle::Terminating);
        assert_eq!(lifecycle(None), Lifecycle::InService);
    }

    #[test]
    fn a_failed_vm_names_the_cause_its_instance_view_gives() {
        let vm: ScaleSetVm = serde_json::from_value(json!({
            "instanceId": "7",
            "properties": {"provisioningState": "Failed", "instanceView": {"statuses": [
                {"code": "ProvisioningState/failed/AllocationFailed", "level": "Error",
                 "displayStatus": "Provisioning failed",
                 "message": "Allocation failed. We do not have sufficient capacity for the requested VM size in this region."},
                {"code": "PowerState/stopped", "level": "Info"}
            ]}}
        }))
        .unwrap();
        assert!(is_failed(vm.properties.provisioning_state.as_deref()));
        let e = launch_error(&vm);
        assert_eq!(
            (e.kind, e.code.as_str()),
            (CloudErrorKind::Quota, "AllocationFailed")
        );
        assert!(e.message.contains("sufficient capacity"));
        let bare: ScaleSetVm = serde_json::from_value(
            json!({"instanceId": "8", "properties": {"provisioningState": "Failed"}}),
        )
        .unwrap();
        let e = launch_error(&bare);
        assert_eq!(
            e.kind,
            CloudErrorKind::Transient,
            "unknown cause: waited out"
        );
        assert!(!is_failed(Some("Succeeded")) && is_failed(Some("failed")));
    }

    #[test]
    fn names_that_would_break_a_path_are_refused() {
        assert!(valid_name("MC_prod_weu_westeurope"));
        assert!(valid_name("aks-general-12345678-vmss"));
        for bad in ["", "a/b", "a?b", "a b", "a#b"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    /// A `GalleryImageVersion` as `GalleryImageVersions_Get` with `$expand=ReplicationStatus`
    /// answers it (the shape of the Compute Gallery reference, api-version 2023-07-03).
    fn version(state: &str, targets: &[&str], summary: &[(&str, &str)]) -> serde_json::Value {
        json!({
            "name": "2026.11.3",
            "location": "westeurope",
            "properties": {
                "provisioningState": state,
                "publishingProfile": {
                    "targetRegions": targets.iter().map(|t| json!({"name": t, "regionalReplicaCount": 1})).collect::<Vec<_>>(),
                    "excludeFromLatest": false
                },
                "replicationStatus": {
                    "aggregatedState": "InProgress",
                    "summary": summary.iter().map(|(r, s)| json!({"region": r, "state": s, "progress": 100})).collect::<Vec<_>>()
                }
            }
        })
    }

    #[test]
    fn discovery_takes_the_newest_succeeded_version_replicated_where_needed() {
        // Shaped as GalleryImageVersions_ListByGalleryImage (2023-07-03) answers.
        let gi = "/subscriptions/s/resourceGroups/img/providers/Microsoft.Compute/galleries/acme/images/general";
        let v = |name: &str, published: &str, state: &str, exclude: bool, regions: &[&str]| {
            serde_json::json!({
                "id": format!("{gi}/versions/{name}"),
                "name": name,
                "location": "westeurope",
                "properties": {
                    "provisioningState": state,
                    "publishingProfile": {
                        "publishedDate": published,
                        "excludeFromLatest": exclude,
                        "targetRegions": regions.iter().map(|r| serde_json::json!({"name": r, "regionalReplicaCount": 1})).collect::<Vec<_>>(),
                    },
                },
            })
        };
        let versions = [
            v(
                "2026.11.2",
                "2026-11-20T08:00:00.0000000+00:00",
                "Succeeded",
                false,
                &["West Europe", "North Europe"],
            ),
            v(
                "2026.11.3",
                "2026-11-22T08:00:00.0000000+00:00",
                "Succeeded",
                false,
                &["West Europe"],
            ),
            v(
                "2026.11.4",
                "2026-11-23T08:00:00.0000000+00:00",
                "Succeeded",
                true,
                &["West Europe", "North Europe"],
            ),
            v(
                "2026.11.5",
                "2026-11-24T08:00:00.0000000+00:00",
                "Creating",
                false,
                &["West Europe", "North Europe"],
            ),
        ];
        let regions = |r: &[&str]| r.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let found = latest_gallery_version(gi, &versions, &regions(&["westeurope"])).unwrap();
        assert_eq!(found.name, "2026.11.3");
        assert_eq!(found.id, format!("{gi}/versions/2026.11.3"));
        // Both regions: 11.3 is not replicated to North Europe, 11.4 is excluded, 11.5 is
        // still creating.
        let found = latest_gallery_version(gi, &versions, &regions(&["westeurope", "northeurope"]))
            .unwrap();
        assert_eq!(found.name, "2026.11.2");
        let e = latest_gallery_version(gi, &versions, &regions(&["eastus"])).unwrap_err();
        assert!(
            e.contains("replicated to eastus (4 versions listed)"),
            "{e}"
        );
    }

    #[test]
    fn a_gallery_version_is_usable_where_it_is_replicated() {
        use crate::cloud::ImageCheck;
        let id = "/subscriptions/s/resourceGroups/img/providers/Microsoft.Compute/galleries/g/images/general/versions/2026.11.3";
        let reason = |c: ImageCheck| match c {
            ImageCheck::Usable => "Usable".to_string(),
            ImageCheck::Unusable { reason, .. } => reason,
        };
        let done = version(
            "Succeeded",
            &["West Europe", "North Europe"],
            &[
                ("West Europe", "Completed"),
                ("North Europe", "Replicating"),
            ],
        );
        // ARM writes display names in the version and plain names on the scale set.
        assert_eq!(
            reason(gallery_version_check(id, "westeurope", &done)),
            "Usable"
        );
        assert_eq!(
            reason(gallery_version_check(id, "northeurope", &done)),
            "ImageNotReady"
        );
        match gallery_version_check(id, "eastus", &done) {
            ImageCheck::Unusable { reason, message } => {
                assert_eq!(reason, "ImageNotReplicated");
                assert!(
                    message.contains("eastus") && message.contains("West Europe"),
                    "{message}"
                );
            }
            ImageCheck::Usable => panic!("not replicated to eastus"),
        }
        assert_eq!(
            reason(gallery_version_check(
                id,
                "westeurope",
                &version("Creating", &["West Europe"], &[])
            )),
            "ImageNotReady"
        );
        assert_eq!(
            reason(gallery_version_check(
                id,
                "westeurope",
                &version("Failed", &["West Europe"], &[])
            )),
            "ImageNotReady"
        );
    }
}
