//! The part of the ARM compute REST API rota reads and writes, typed; and the one-string form
//! of an image reference that rota's fleet repo and `GroupState` use.
//!
//! Field names follow the published REST reference (api-version 2024-07-01). Everything rota
//! does not use is left out: serde ignores unknown fields, so a newer response still parses.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `Microsoft.Compute/virtualMachineScaleSets`, as `VirtualMachineScaleSets_Get` returns it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleSet {
    #[serde(default)]
    pub location: String,
    #[serde(default)]
    pub etag: Option<String>,
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    #[serde(default)]
    pub sku: Sku,
    #[serde(default)]
    pub properties: ScaleSetProperties,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sku {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleSetProperties {
    #[serde(default)]
    pub provisioning_state: Option<String>,
    #[serde(default)]
    pub orchestration_mode: Option<String>,
    #[serde(default)]
    pub upgrade_policy: Option<UpgradePolicy>,
    #[serde(default)]
    pub virtual_machine_profile: Option<VmProfile>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePolicy {
    #[serde(default)]
    pub mode: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmProfile {
    #[serde(default)]
    pub storage_profile: Option<StorageProfile>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageProfile {
    #[serde(default)]
    pub image_reference: Option<ImageReference>,
}

/// `ImageReference`: a gallery image (version) or managed image by `id`, a shared or community
/// gallery image by its own ID, or a marketplace image by publisher, offer, sku and version.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageReference {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_gallery_image_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub community_gallery_image_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl ImageReference {
    /// The one-string form: the resource ID for gallery and managed images (what
    /// `az sig image-version show --query id` prints), `publisher:offer:sku:version` (the
    /// URN `az vm image list` prints) for marketplace images. `None` if the reference is empty.
    pub fn render(&self) -> Option<String> {
        let id = self
            .id
            .as_deref()
            .or(self.shared_gallery_image_id.as_deref())
            .or(self.community_gallery_image_id.as_deref())
            .filter(|s| !s.is_empty());
        if let Some(id) = id {
            return Some(id.to_string());
        }
        match (&self.publisher, &self.offer, &self.sku, &self.version) {
            (Some(p), Some(o), Some(s), Some(v)) => Some(format!("{p}:{o}:{s}:{v}")),
            _ => None,
        }
    }

    /// Parse the one-string form back (see [`ImageReference::render`]).
    pub fn parse(image: &str) -> Result<ImageReference, String> {
        let image = image.trim();
        let lower = image.to_ascii_lowercase();
        if lower.starts_with("/sharedgalleries/") {
            return Ok(ImageReference {
                shared_gallery_image_id: Some(image.to_string()),
                ..Default::default()
            });
        }
        if lower.starts_with("/communitygalleries/") {
            return Ok(ImageReference {
                community_gallery_image_id: Some(image.to_string()),
                ..Default::default()
            });
        }
        if lower.starts_with("/subscriptions/") {
            if !lower.contains("/providers/microsoft.compute/") {
                return Err(format!(
                    "image {image:?} is a resource ID but not a Microsoft.Compute one (expected a gallery image version or managed image ID)"
                ));
            }
            return Ok(ImageReference {
                id: Some(image.to_string()),
                ..Default::default()
            });
        }
        let parts: Vec<&str> = image.split(':').collect();
        if parts.len() == 4 && parts.iter().all(|p| !p.is_empty() && !p.contains('/')) {
            return Ok(ImageReference {
                publisher: Some(parts[0].to_string()),
                offer: Some(parts[1].to_string()),
                sku: Some(parts[2].to_string()),
                version: Some(parts[3].to_string()),
                ..Default::default()
            });
        }
        Err(format!(
            "image {image:?} is neither an image resource ID (/subscriptions/…/galleries/…/versions/…, /SharedGalleries/…, /CommunityGalleries/…) nor a marketplace URN publisher:offer:sku:version"
        ))
    }

    /// The PATCH body for this reference: every field written, unused ones as JSON `null`,
    /// so that switching between a gallery ID and a marketplace URN clears the other form.
    pub fn patch_value(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "sharedGalleryImageId": self.shared_gallery_image_id,
            "communityGalleryImageId": self.community_gallery_image_id,
            "publisher": self.publisher,
            "offer": self.offer,
            "sku": self.sku,
            "version": self.version,
        })
    }
}

/// Why the scale set cannot move from image reference `current` to `wanted`, if it cannot:
/// the API reference says an image reference's publisher and offer "can only be set when
/// you create the scale set". So a marketplace image may change its sku and version, a
/// gallery or managed image its ID, but a switch between a marketplace image and a gallery
/// image (which sets or clears publisher and offer) or to another offer or publisher is
/// refused by Azure; rota refuses it first, before touching the group.
pub fn form_change(current: &ImageReference, wanted: &ImageReference) -> Option<String> {
    let same = |a: &Option<String>, b: &Option<String>| match (a, b) {
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        (None, None) => true,
        _ => false,
    };
    let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
    let changed: Vec<String> = [
        ("publisher", &current.publisher, &wanted.publisher),
        ("offer", &current.offer, &wanted.offer),
    ]
    .into_iter()
    .filter(|(_, a, b)| !same(a, b))
    .map(|(f, a, b)| format!("{f} {} -> {}", show(a), show(b)))
    .collect();
    if changed.is_empty() {
        return None;
    }
    Some(format!(
        "the image would change the scale set's imageReference {}; Azure lets an image reference's publisher and offer be set only when the scale set is created, so a switch between a marketplace image and a gallery image, or to another publisher or offer, needs a new scale set (node pool); rota changes the sku and version of a marketplace image, or the ID of a gallery or managed image",
        changed.join(", ")
    ))
}

/// Whether two one-string images name the same image. ARM resource IDs are case-insensitive
/// (ARM may return `resourceGroups/MC_…` in another case than it was written); marketplace
/// URNs are compared the same way, as Azure treats publisher, offer and sku.
pub fn same_image(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// One page of `VirtualMachineScaleSetVMs_List`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmPage {
    #[serde(default)]
    pub value: Vec<ScaleSetVm>,
    #[serde(default)]
    pub next_link: Option<String>,
}

/// `Microsoft.Compute/virtualMachineScaleSets/virtualMachines`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleSetVm {
    #[serde(default)]
    pub instance_id: String,
    #[serde(default)]
    pub location: String,
    #[serde(default)]
    pub zones: Vec<String>,
    #[serde(default)]
    pub properties: ScaleSetVmProperties,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleSetVmProperties {
    #[serde(default)]
    pub provisioning_state: Option<String>,
    #[serde(default)]
    pub storage_profile: Option<StorageProfile>,
    /// Present with `$expand=instanceView`: its statuses say why provisioning failed.
    #[serde(default)]
    pub instance_view: Option<VmInstanceView>,
    /// The VM's host name: an AKS node's name, and the machine name AKS deletes it by.
    #[serde(default)]
    pub os_profile: Option<VmOsProfile>,
}

/// `osProfile` of a scale set VM, as far as rota reads it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmOsProfile {
    #[serde(default)]
    pub computer_name: Option<String>,
}

/// `VirtualMachineScaleSetVMInstanceView`, the part rota reads.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VmInstanceView {
    #[serde(default)]
    pub statuses: Vec<InstanceViewStatus>,
}

/// `InstanceViewStatus`: e.g. `{"code": "ProvisioningState/failed/AllocationFailed",
/// "level": "Error", "displayStatus": "Provisioning failed", "message": "..."}`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceViewStatus {
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub display_status: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

/// The body of an `Azure-AsyncOperation` status URL.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AsyncOperation {
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub error: Option<ArmError>,
}

/// ARM's error body: `{"error": {"code": "...", "message": "..."}}`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ErrorBody {
    #[serde(default)]
    pub error: Option<ArmError>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct ArmError {
    #[serde(default)]
    pub code: String,
    #[serde(default)]
    pub message: String,
    /// Nested causes; a failed operation often puts the useful code here
    /// (`{"code":"OperationFailed","details":[{"code":"QuotaExceeded",...}]}`).
    #[serde(default)]
    pub details: Vec<ArmError>,
}

impl ArmError {
    /// The code and message that say most: the first detail whose code is not a generic
    /// wrapper, else this one. Messages of all levels are joined so nothing is lost.
    pub fn most_specific(&self) -> (String, String) {
        let generic = |c: &str| {
            matches!(
                c.to_ascii_lowercase().as_str(),
                "" | "operationfailed" | "deploymentfailed" | "badrequest" | "conflict"
            )
        };
        let mut code = self.code.clone();
        let mut messages = vec![self.message.clone()];
        let mut stack: Vec<&ArmError> = self.details.iter().collect();
        while let Some(d) = stack.pop() {
            if generic(&code) && !generic(&d.code) {
                code = d.code.clone();
            }
            if !d.message.is_empty() && !messages.contains(&d.message) {
                messages.push(d.message.clone());
            }
            stack.extend(d.details.iter());
        }
        let message = messages
            .into_iter()
            .filter(|m| !m.is_empty())
            .collect::<Vec<_>>()
            .join(" / ");
        (code, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_render_and_parse_back() {
        let gallery = "/subscriptions/1b2c/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/general/versions/2026.11.1";
        let r = ImageReference::parse(gallery).unwrap();
        assert_eq!(r.id.as_deref(), Some(gallery));
        assert_eq!(r.render().unwrap(), gallery);

        let urn = "Canonical:ubuntu-24_04-lts:server:24.04.202611010";
        let r = ImageReference::parse(urn).unwrap();
        assert_eq!(
            (r.publisher.as_deref(), r.version.as_deref()),
            (Some("Canonical"), Some("24.04.202611010"))
        );
        assert_eq!(r.render().unwrap(), urn);

        let shared = "/SharedGalleries/acme-123/Images/general/Versions/1.0.0";
        let r = ImageReference::parse(shared).unwrap();
        assert_eq!(r.shared_gallery_image_id.as_deref(), Some(shared));
        assert_eq!(r.render().unwrap(), shared);
    }

    #[test]
    fn bad_images_are_refused_with_the_reason() {
        for bad in [
            "",
            "ami-0123",
            "a:b:c",
            "a::c:d",
            "/subscriptions/x/resourceGroups/y/providers/Microsoft.Network/virtualNetworks/v",
        ] {
            let e = ImageReference::parse(bad).unwrap_err();
            assert!(e.contains("image"), "{e}");
        }
    }

    #[test]
    fn patch_clears_the_other_form() {
        let v = ImageReference::parse("a:b:c:d").unwrap().patch_value();
        assert!(v["id"].is_null());
        assert_eq!(v["publisher"], "a");
    }

    #[test]
    fn publisher_and_offer_are_fixed_at_creation() {
        let gallery = |v: &str| {
            ImageReference::parse(&format!(
                "/subscriptions/s/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/node/versions/{v}"
            ))
            .unwrap()
        };
        let urn = |s: &str| ImageReference::parse(s).unwrap();
        // Allowed: a new gallery version, a new marketplace sku or version.
        assert_eq!(form_change(&gallery("1.0.0"), &gallery("2.0.0")), None);
        assert_eq!(
            form_change(
                &urn("Canonical:ubuntu-24_04-lts:server:1"),
                &urn("canonical:ubuntu-24_04-lts:server-arm64:2")
            ),
            None
        );
        // Refused, each naming what would change.
        let e = form_change(
            &gallery("1.0.0"),
            &urn("Canonical:ubuntu-24_04-lts:server:1"),
        )
        .unwrap();
        assert!(
            e.contains("publisher (none) -> Canonical")
                && e.contains("offer (none) -> ubuntu-24_04-lts"),
            "{e}"
        );
        let e = form_change(
            &urn("Canonical:ubuntu-24_04-lts:server:1"),
            &gallery("1.0.0"),
        )
        .unwrap();
        assert!(e.contains("publisher Canonical -> (none)"), "{e}");
        let e = form_change(
            &urn("Canonical:ubuntu-24_04-lts:server:1"),
            &urn("Canonical:0001-com-ubuntu-server-jammy:22_04-lts:1"),
        )
        .unwrap();
        assert!(
            e.contains("offer ubuntu-24_04-lts -> 0001-com-ubuntu-server-jammy")
                && !e.contains("publisher C"),
            "{e}"
        );
    }

    #[test]
    fn same_image_ignores_case_of_resource_ids() {
        assert!(same_image(
            "/subscriptions/S/resourceGroups/MC_rg/providers/Microsoft.Compute/galleries/g/images/i/versions/1",
            "/subscriptions/s/resourcegroups/mc_rg/providers/microsoft.compute/galleries/g/images/i/versions/1"
        ));
        assert!(!same_image("a:b:c:1", "a:b:c:2"));
    }

    #[test]
    fn the_most_specific_error_code_wins() {
        let e: ErrorBody = serde_json::from_str(
            r#"{"error":{"code":"OperationFailed","message":"The operation failed.","details":[{"code":"QuotaExceeded","message":"Operation could not be completed as it results in exceeding approved standardDSv3Family Cores quota."}]}}"#,
        )
        .unwrap();
        let (code, message) = e.error.unwrap().most_specific();
        assert_eq!(code, "QuotaExceeded");
        assert!(message.contains("The operation failed.") && message.contains("quota"));
    }

    #[test]
    fn a_published_vm_list_page_parses() {
        // Shape of VirtualMachineScaleSetVM_List in the REST reference, cut down.
        let page: VmPage = serde_json::from_str(
            r#"{"value":[{"name":"vmss_0","instanceId":"0","location":"westeurope","zones":["1"],
                "id":"/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/vmss/virtualMachines/0",
                "properties":{"latestModelApplied":true,"provisioningState":"Succeeded",
                  "storageProfile":{"imageReference":{"publisher":"Canonical","offer":"o","sku":"s","version":"1","exactVersion":"1"}}}}],
              "nextLink":"https://management.azure.com/next"}"#,
        )
        .unwrap();
        let vm = &page.value[0];
        assert_eq!((vm.instance_id.as_str(), vm.zones[0].as_str()), ("0", "1"));
        let image = vm.properties.storage_profile.as_ref().unwrap();
        assert_eq!(
            image.image_reference.as_ref().unwrap().render().unwrap(),
            "Canonical:o:s:1"
        );
        assert!(page.next_link.is_some());
    }
}
