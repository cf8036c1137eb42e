//! The simulated clouds' published images: where each image exists and whether it can launch
//! there, as the real clouds decide it. An AMI exists in one region and for one architecture
//! (launching it elsewhere fails with EC2's `InvalidAMIID.NotFound`); a GCP image is global
//! but may be pending or deprecated; an Azure gallery image version is replicated to the
//! regions it lists.
//!
//! A catalog that does not `require_published` accepts images it does not know (the unit
//! tests' `ami-1`); the scenario of a fleet repo publishes every image the repo names
//! ([`images_of`]) and requires them, so that the simulated fleet judges a repo that pins one
//! AMI for two regions as a real account would.

use std::collections::BTreeMap;

use rota_core::cloud::{Arch, GroupRef, ImageCheck};
use rota_core::fleet::Fleet;
use rota_core::fleet::model::{AwsImages, RegionImage};
use rota_core::fleet::resolved::Cloud;

/// Where an image stands in its cloud.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ImageState {
    #[default]
    Available,
    /// Being created or replicated (AWS `pending`, GCP `PENDING`, Azure `Creating`).
    Pending,
    /// Still there, but marked not to be used for new instances (GCP `DEPRECATED`).
    Deprecated,
}

/// One published image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimImage {
    pub id: String,
    /// The regions it exists in; empty: everywhere (a GCP image).
    pub regions: Vec<String>,
    pub arch: Arch,
    pub state: ImageState,
}

impl SimImage {
    /// Whether it exists where a group of `region` launches (everywhere when it lists none).
    fn exists_in(&self, region: Option<&str>) -> bool {
        self.regions.is_empty() || region.is_some_and(|r| self.regions.iter().any(|x| x == r))
    }

    pub fn new(id: impl Into<String>, regions: &[&str], arch: Arch) -> Self {
        SimImage {
            id: id.into(),
            regions: regions.iter().map(|r| r.to_string()).collect(),
            arch,
            state: ImageState::Available,
        }
    }
}

/// The images of one simulated account (every cloud).
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    images: BTreeMap<String, SimImage>,
    /// Refuse images that were not published (a fleet repo's scenario).
    pub require_published: bool,
}

impl Catalog {
    /// Publish (or replace) an image.
    pub fn publish(&mut self, image: SimImage) {
        self.images.insert(image.id.clone(), image);
    }

    /// Whether `image` can launch in `group`, in the words of the group's cloud.
    pub fn check(&self, group: &GroupRef, image: &str, arch: Arch) -> ImageCheck {
        let region = group_region(group);
        let where_ = region.as_deref().unwrap_or("its region");
        let Some(img) = self.images.get(image) else {
            if !self.require_published {
                return ImageCheck::Usable;
            }
            return ImageCheck::unusable("ImageNotFound", not_found(group, image, where_));
        };
        if !img.exists_in(region.as_deref()) {
            let reason = match group {
                GroupRef::Azure { .. } => "ImageNotReplicated",
                _ => "ImageNotFound",
            };
            let message = match group {
                GroupRef::Azure { .. } => format!(
                    "gallery image version {image} is not replicated to {where_} (its target regions: {})",
                    img.regions.join(", ")
                ),
                _ => not_found(group, image, where_),
            };
            return ImageCheck::unusable(reason, message);
        }
        match img.state {
            ImageState::Pending => {
                return ImageCheck::unusable(
                    "ImageNotReady",
                    format!("image {image} in {where_} is still pending"),
                );
            }
            ImageState::Deprecated => {
                return ImageCheck::unusable(
                    "ImageDeprecated",
                    format!("image {image} is DEPRECATED"),
                );
            }
            ImageState::Available => {}
        }
        if img.arch != arch {
            return ImageCheck::unusable(
                "ImageWrongArch",
                format!(
                    "image {image} in {where_} is {} and the pool is {arch}",
                    img.arch
                ),
            );
        }
        ImageCheck::Usable
    }

    /// Why a launch of `image` in `group` fails, as the cloud reports it (`None`: it boots).
    /// Only where the image is absent: architecture and deprecation are the pool's business.
    pub fn launch_error(&self, group: &GroupRef, image: &str) -> Option<String> {
        let absent = match self.images.get(image) {
            None => self.require_published,
            Some(img) => !img.exists_in(group_region(group).as_deref()),
        };
        absent.then(|| match group {
            GroupRef::Aws { .. } => "InvalidAMIID.NotFound".to_string(),
            GroupRef::Gcp { .. } => "RESOURCE_NOT_FOUND".to_string(),
            GroupRef::Azure { .. } => "GalleryImageNotFound".to_string(),
        })
    }
}

fn not_found(group: &GroupRef, image: &str, region: &str) -> String {
    match group {
        // EC2's words for an AMI of another region.
        GroupRef::Aws { .. } => {
            format!("The image id '[{image}]' does not exist (in {region})")
        }
        GroupRef::Gcp { .. } => format!("The resource '{image}' was not found"),
        GroupRef::Azure { .. } => {
            format!("The gallery image version {image} was not found (in {region})")
        }
    }
}

/// The region a group launches in: the AWS region, the GCP group's region (or its zone's),
/// the Azure location read off an AKS node resource group (`MC_<rg>_<cluster>_<location>`).
pub fn group_region(group: &GroupRef) -> Option<String> {
    match group {
        GroupRef::Aws { region, .. } => Some(region.clone()),
        GroupRef::Gcp {
            region: Some(r), ..
        } => Some(r.clone()),
        GroupRef::Gcp { zone: Some(z), .. } => z.rsplit_once('-').map(|(r, _)| r.to_string()),
        GroupRef::Gcp { .. } => None,
        GroupRef::Azure { resource_group, .. } => resource_group
            .strip_prefix("MC_")
            .and_then(|r| r.rsplit_once('_'))
            .map(|(_, region)| region.to_ascii_lowercase()),
    }
}

/// Every image a fleet repo names, published where the repo says it exists: an AMI of a
/// region map in that region (per architecture), a plain AMI in the one region of the AWS
/// clusters on its channel (the first by name when they span several, which validation
/// refuses: the others then fail to launch, as on a real account), GCP images everywhere,
/// Azure versions replicated to every region.
pub fn images_of(fleet: &Fleet) -> Vec<SimImage> {
    let mut channel_regions: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for c in fleet.clusters.values() {
        if c.spec.cloud_kind() != Some(Cloud::Aws) {
            continue;
        }
        let Some(region) = c.spec.region() else {
            continue;
        };
        for p in &c.spec.pools {
            let rs = channel_regions.entry(p.channel.as_str()).or_default();
            if !rs.iter().any(|r| r == region) {
                rs.push(region.to_string());
                rs.sort();
            }
        }
    }
    let mut out = Vec::new();
    for (channel, ch) in &fleet.spec.images {
        for images in ch.versions.values() {
            let mut push = |id: &str, regions: Vec<String>, arch: Arch| {
                out.push(SimImage {
                    id: id.to_string(),
                    regions,
                    arch,
                    state: ImageState::Available,
                })
            };
            match &images.aws {
                Some(AwsImages::One(id)) => {
                    let home = channel_regions
                        .get(channel.as_str())
                        .and_then(|rs| rs.first())
                        .cloned()
                        .unwrap_or_else(|| "us-east-1".into());
                    push(id, vec![home], Arch::X86_64);
                }
                Some(AwsImages::ByRegion(m)) => {
                    for (region, img) in m {
                        match img {
                            RegionImage::One(id) => push(id, vec![region.clone()], Arch::X86_64),
                            RegionImage::ByArch(a) => {
                                for (arch, id) in a {
                                    push(id, vec![region.clone()], *arch);
                                }
                            }
                        }
                    }
                }
                None => {}
            }
            // GCP images are global; Azure versions here replicate everywhere. Neither has an
            // architecture in the repo: the pools' own (x86_64) is assumed.
            for id in images.gcp.iter().chain(&images.azure) {
                push(id, Vec::new(), Arch::X86_64);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asg(region: &str) -> GroupRef {
        GroupRef::Aws {
            region: region.into(),
            auto_scaling_group: "g".into(),
        }
    }

    #[test]
    fn an_ami_launches_in_its_region_and_arch_only() {
        let mut c = Catalog {
            require_published: true,
            ..Default::default()
        };
        c.publish(SimImage::new("ami-0e1", &["us-east-1"], Arch::X86_64));
        assert_eq!(
            c.check(&asg("us-east-1"), "ami-0e1", Arch::X86_64),
            ImageCheck::Usable
        );
        let ImageCheck::Unusable { reason, message } =
            c.check(&asg("us-west-2"), "ami-0e1", Arch::X86_64)
        else {
            panic!("another region's AMI must not be usable")
        };
        assert_eq!(reason, "ImageNotFound");
        assert!(message.contains("'[ami-0e1]' does not exist") && message.contains("us-west-2"));
        assert!(matches!(
            c.check(&asg("us-east-1"), "ami-0e1", Arch::Arm64),
            ImageCheck::Unusable { reason, .. } if reason == "ImageWrongArch"
        ));
        assert_eq!(
            c.launch_error(&asg("us-west-2"), "ami-0e1").as_deref(),
            Some("InvalidAMIID.NotFound")
        );
        assert_eq!(c.launch_error(&asg("us-east-1"), "ami-0e1"), None);
        assert!(c.launch_error(&asg("us-east-1"), "ami-unknown").is_some());
        c.require_published = false;
        assert_eq!(c.launch_error(&asg("us-east-1"), "ami-unknown"), None);
        assert_eq!(
            c.check(&asg("us-east-1"), "ami-unknown", Arch::Arm64),
            ImageCheck::Usable
        );
    }

    #[test]
    fn pending_and_deprecated_images_wait() {
        let mut c = Catalog::default();
        let mut img = SimImage::new("projects/p/global/images/i", &[], Arch::X86_64);
        img.state = ImageState::Pending;
        c.publish(img.clone());
        let gcp = GroupRef::Gcp {
            project: "p".into(),
            instance_group_manager: "m".into(),
            zone: Some("us-central1-a".into()),
            region: None,
        };
        assert!(
            matches!(c.check(&gcp, &img.id, Arch::X86_64), ImageCheck::Unusable { reason, .. } if reason == "ImageNotReady")
        );
        img.state = ImageState::Deprecated;
        c.publish(img.clone());
        assert!(
            matches!(c.check(&gcp, &img.id, Arch::X86_64), ImageCheck::Unusable { reason, .. } if reason == "ImageDeprecated")
        );
        assert_eq!(group_region(&gcp).as_deref(), Some("us-central1"));
    }
}
