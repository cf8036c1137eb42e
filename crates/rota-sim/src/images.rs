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

use chrono::{DateTime, Utc};
use rota_core::cloud::{Arch, CloudErrorKind, FoundImage, GroupRef, ImageCheck, ImageQuery};
use rota_core::fleet::Fleet;
use rota_core::fleet::model::{AwsImages, RegionImage};
use rota_core::fleet::resolved::Cloud;
use rota_core::images::glob_match;

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
    /// The cloud's name for it (the build, as discovery compares it across regions).
    pub name: String,
    /// When it was published.
    pub created: DateTime<Utc>,
    /// Its GCP image family.
    pub family: Option<String>,
    /// An Azure gallery version kept out of "latest".
    pub exclude_from_latest: bool,
    /// A bad build: it boots and its nodes turn Ready, with their DaemonSets' node agents
    /// (on the host's network), but the pod network of each workload pod fails to come up
    /// several times before it starts (`kubelet::SANDBOX_FAILURES`). This says why, as the
    /// kubelet's `FailedCreatePodSandBox` events do. What an events gate exists to catch.
    pub defect: Option<String>,
}

impl SimImage {
    /// Whether it exists where a group of `region` launches (everywhere when it lists none).
    fn exists_in(&self, region: Option<&str>) -> bool {
        self.regions.is_empty() || region.is_some_and(|r| self.regions.iter().any(|x| x == r))
    }

    /// An available image, named after the last segment of its ID, published at the epoch.
    pub fn new(id: impl Into<String>, regions: &[&str], arch: Arch) -> Self {
        let id = id.into();
        SimImage {
            name: id.rsplit('/').next().unwrap_or(&id).to_string(),
            id,
            regions: regions.iter().map(|r| r.to_string()).collect(),
            arch,
            state: ImageState::Available,
            created: DateTime::UNIX_EPOCH,
            family: None,
            exclude_from_latest: false,
            defect: None,
        }
    }

    /// The same image, bad: the pod network fails on its nodes, for `why`.
    pub fn defective(mut self, why: impl Into<String>) -> Self {
        self.defect = Some(why.into());
        self
    }

    /// The same image with the cloud's name for it and its publication time.
    pub fn named(mut self, name: impl Into<String>, created: DateTime<Utc>) -> Self {
        self.name = name.into();
        self.created = created;
        self
    }

    fn found(&self) -> FoundImage {
        FoundImage {
            id: self.id.clone(),
            name: self.name.clone(),
            created: self.created,
        }
    }
}

/// The images of one simulated account (every cloud).
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    images: BTreeMap<String, SimImage>,
    /// SSM parameters by (region, name): what an `ssmParameter` source reads.
    parameters: BTreeMap<(String, String), String>,
    /// Refuse images that were not published (a fleet repo's scenario).
    pub require_published: bool,
}

impl Catalog {
    /// Publish (or replace) an image.
    pub fn publish(&mut self, image: SimImage) {
        self.images.insert(image.id.clone(), image);
    }

    /// Why the pod network fails on nodes of `image`, if it is a bad build
    /// ([`SimImage::defect`]).
    pub fn defect(&self, image: &str) -> Option<String> {
        self.images.get(image).and_then(|i| i.defect.clone())
    }

    /// Set an SSM parameter in `region` (as AWS publishes the EKS AMI's ID).
    pub fn set_parameter(&mut self, region: &str, name: &str, value: &str) {
        self.parameters
            .insert((region.to_string(), name.to_string()), value.to_string());
    }

    /// The newest image `query` names, as the cloud's own lookup answers it: an SSM
    /// parameter's AMI (which must exist in the region, for the arch), the newest available
    /// AMI whose name matches (owners are not modelled: every simulated AMI is the
    /// account's), a GCP family's newest READY, non-deprecated image, an Azure gallery's
    /// newest succeeded version not excluded from latest and replicated to every region asked.
    pub fn find(&self, query: &ImageQuery) -> Result<FoundImage, (CloudErrorKind, String)> {
        let arch = query.arch();
        let newest = |ok: &dyn Fn(&SimImage) -> bool| {
            self.images
                .values()
                .filter(|i| i.state == ImageState::Available && i.arch == arch && ok(i))
                .max_by(|a, b| a.created.cmp(&b.created).then(a.id.cmp(&b.id)))
                .map(SimImage::found)
        };
        match query {
            ImageQuery::AwsSsm {
                region, parameter, ..
            } => {
                let Some(value) = self.parameters.get(&(region.clone(), parameter.clone())) else {
                    return Err((
                        CloudErrorKind::NotFound,
                        format!("ParameterNotFound: {parameter} does not exist in {region}"),
                    ));
                };
                if !value.starts_with("ami-") {
                    return Err((
                        CloudErrorKind::Invalid,
                        format!(
                            "SSM parameter {parameter} in {region} holds {value:?}, not an AMI ID"
                        ),
                    ));
                }
                match self.images.get(value) {
                    Some(i) if i.exists_in(Some(region)) && i.arch == arch => Ok(i.found()),
                    Some(i) if i.exists_in(Some(region)) => Err((
                        CloudErrorKind::Invalid,
                        format!(
                            "SSM parameter {parameter} in {region} names {value}, an {} AMI, not {arch}",
                            i.arch
                        ),
                    )),
                    _ => Err((
                        CloudErrorKind::NotFound,
                        format!(
                            "SSM parameter {parameter} in {region} names {value}: the image id '[{value}]' does not exist"
                        ),
                    )),
                }
            }
            ImageQuery::AwsName {
                region,
                name_filter,
                ..
            } => newest(&|i| {
                i.id.starts_with("ami-")
                    && i.exists_in(Some(region))
                    && glob_match(name_filter, &i.name)
            })
            .ok_or_else(|| {
                (
                    CloudErrorKind::NotFound,
                    format!("no available {arch} AMI named {name_filter} in {region}"),
                )
            }),
            ImageQuery::GcpFamily {
                project, family, ..
            } => {
                let prefix = format!("projects/{project}/global/images/");
                newest(&|i| i.id.starts_with(&prefix) && i.family.as_deref() == Some(family))
                    .ok_or_else(|| {
                        (
                            CloudErrorKind::NotFound,
                            format!("image family {project}/{family} has no READY, non-deprecated {arch} image"),
                        )
                    })
            }
            ImageQuery::AzureGallery {
                gallery_image,
                regions,
                ..
            } => {
                let prefix = format!("{gallery_image}/versions/");
                newest(&|i| {
                    i.id.starts_with(&prefix)
                        && !i.exclude_from_latest
                        && regions.iter().all(|r| i.exists_in(Some(r)))
                })
                .ok_or_else(|| {
                    (
                        CloudErrorKind::NotFound,
                        format!(
                            "gallery image {gallery_image} has no succeeded version, not excluded from latest, replicated to {}",
                            regions.join(", ")
                        ),
                    )
                })
            }
        }
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
            GroupRef::Managed(m) => format!("{}ImageNotFound", m.owner().service()),
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
        GroupRef::Managed(m) => {
            format!("{} has no image {image} (in {region})", m.owner().service())
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
        GroupRef::Managed(m) => m.region().map(str::to_string),
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
        let source = ch.source.as_ref();
        for (version, images) in &ch.versions {
            let mut push = |id: &str, regions: Vec<String>, arch: Arch| {
                let mut img = SimImage::new(id, &[], arch);
                img.regions = regions;
                if let Some(t) = images.released {
                    img.created = t;
                }
                // Named as the channel's source finds it, so that `rota images discover`
                // against the simulated clouds sees the repo's versions as the builds they are.
                let dashed = version.replace('.', "-");
                if id.starts_with("ami-") {
                    if let Some(f) = source
                        .and_then(|s| s.aws.as_ref())
                        .and_then(|a| a.name_filter.as_ref())
                    {
                        img.name = f
                            .replace("{arch}", arch.as_str())
                            .replacen('*', &dashed, 1)
                            .replace(['*', '?'], "");
                    }
                } else if id.starts_with("projects/") {
                    img.family = source
                        .and_then(|s| s.gcp.as_ref())
                        .map(|g| g.family.replace("{arch}", arch.as_str()));
                }
                out.push(img)
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
            // The services' own images, which they ship in every region: a GKE version and
            // image type, an AKS node image, named as the owners' pools carry them (a GKE
            // `CUSTOM` type boots the version's `gcp` image, published above). Without them a
            // managed pool's update could launch no node on its pin.
            let gke = images
                .gke
                .as_ref()
                .filter(|g| g.image_type != rota_core::fleet::owner::GKE_CUSTOM_IMAGE_TYPE)
                .map(|g| match &g.node_version {
                    Some(v) => format!("{v}/{}", g.image_type),
                    None => g.image_type.clone(),
                });
            let aks = images.aks.as_ref().map(|a| a.node_image_version.clone());
            for id in gke.iter().chain(&aks) {
                push(id, Vec::new(), Arch::X86_64);
            }
        }
    }
    out
}

/// The SSM parameters a fleet repo's sources read (`ssmParameter`, `{arch}` filled in), each
/// in every region of its channel's newest version (by `released`, else the last listed),
/// holding that version's AMI there: what AWS publishes for the EKS AMIs.
pub fn parameters_of(fleet: &Fleet) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for ch in fleet.spec.images.values() {
        let Some(param) = ch
            .source
            .as_ref()
            .and_then(|s| s.aws.as_ref())
            .and_then(|a| a.ssm_parameter.as_ref())
        else {
            continue;
        };
        let newest = ch
            .versions
            .values()
            .enumerate()
            .max_by_key(|(i, v)| (v.released, *i))
            .map(|(_, v)| v);
        let Some(AwsImages::ByRegion(m)) = newest.and_then(|v| v.aws.as_ref()) else {
            continue;
        };
        for (region, img) in m {
            let ids: Vec<(Arch, &String)> = match img {
                RegionImage::One(id) => vec![(Arch::X86_64, id)],
                RegionImage::ByArch(a) => a.iter().map(|(arch, id)| (*arch, id)).collect(),
            };
            for (arch, id) in ids {
                out.push((
                    region.clone(),
                    param.replace("{arch}", arch.as_str()),
                    id.clone(),
                ));
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

    #[test]
    fn lookups_answer_as_the_clouds_do_and_refuse_what_is_not_an_image() {
        let t = |s: &str| s.parse::<DateTime<Utc>>().unwrap();
        let mut c = Catalog::default();
        let ssm = |region: &str| ImageQuery::AwsSsm {
            region: region.into(),
            parameter: "/p/x86_64".into(),
            arch: Arch::X86_64,
        };
        c.set_parameter("us-east-1", "/p/x86_64", "ami-0e1");
        c.publish(
            SimImage::new("ami-0e1", &["us-east-1"], Arch::X86_64)
                .named("b-1", t("2026-11-01T00:00:00Z")),
        );
        assert_eq!(c.find(&ssm("us-east-1")).unwrap().name, "b-1");
        let (kind, why) = c.find(&ssm("eu-west-1")).unwrap_err();
        assert_eq!(kind, CloudErrorKind::NotFound);
        assert!(why.contains("does not exist in eu-west-1"), "{why}");
        c.set_parameter("us-east-1", "/p/x86_64", "1.31.2");
        let (kind, why) = c.find(&ssm("us-east-1")).unwrap_err();
        assert_eq!(kind, CloudErrorKind::Invalid);
        assert!(why.contains("holds \"1.31.2\", not an AMI ID"), "{why}");
        // A name filter: the newest available of the arch, in the region.
        c.publish(
            SimImage::new("ami-0e2", &["us-east-1"], Arch::X86_64)
                .named("b-2", t("2026-11-02T00:00:00Z")),
        );
        c.publish(
            SimImage::new("ami-0e3", &["us-east-1"], Arch::Arm64)
                .named("b-3", t("2026-11-03T00:00:00Z")),
        );
        let by_name = ImageQuery::AwsName {
            region: "us-east-1".into(),
            name_filter: "b-*".into(),
            owners: vec![],
            arch: Arch::X86_64,
        };
        assert_eq!(c.find(&by_name).unwrap().id, "ami-0e2");
        // A family: its newest READY one; none READY is NotFound.
        let mut g = SimImage::new("projects/p/global/images/g-2", &[], Arch::X86_64)
            .named("g-2", t("2026-11-02T00:00:00Z"));
        g.family = Some("f".into());
        g.state = ImageState::Deprecated;
        c.publish(g);
        let fam = ImageQuery::GcpFamily {
            project: "p".into(),
            family: "f".into(),
            arch: Arch::X86_64,
        };
        let (kind, why) = c.find(&fam).unwrap_err();
        assert_eq!(kind, CloudErrorKind::NotFound);
        assert!(why.contains("has no READY"), "{why}");
        // A gallery: the newest not excluded from latest and replicated where asked.
        let gi = "/s/g/images/general";
        let mut v2 = SimImage::new(
            format!("{gi}/versions/1.0.2"),
            &["westeurope"],
            Arch::X86_64,
        )
        .named("1.0.2", t("2026-11-02T00:00:00Z"));
        v2.exclude_from_latest = true;
        c.publish(v2);
        c.publish(
            SimImage::new(
                format!("{gi}/versions/1.0.1"),
                &["westeurope", "northeurope"],
                Arch::X86_64,
            )
            .named("1.0.1", t("2026-11-01T00:00:00Z")),
        );
        let gal = |regions: &[&str]| ImageQuery::AzureGallery {
            gallery_image: gi.into(),
            regions: regions.iter().map(|r| r.to_string()).collect(),
            arch: Arch::X86_64,
        };
        assert_eq!(c.find(&gal(&["westeurope"])).unwrap().name, "1.0.1");
        assert!(c.find(&gal(&["eastus"])).is_err());
    }

    /// A version's GKE and AKS forms are images the simulated services launch: published,
    /// in every region, as the owners' pools name them.
    #[test]
    fn a_repos_gke_and_aks_images_are_published() {
        let text = r#"apiVersion: rota.dev/v1alpha1
kind: Fleet
metadata: {name: acme}
spec:
  images:
    general:
      versions:
        "2026.11.2":
          gke: {nodeVersion: 1.31.5-gke.1023000, imageType: COS_CONTAINERD}
          aks: {nodeImageVersion: AKSUbuntu-2204gen2containerd-202611.02.0}
  waves:
    - name: canary
      clusters: [aks-1]
      images: {general: "2026.11.2"}
"#;
        let cluster = r#"apiVersion: rota.dev/v1alpha1
kind: Cluster
metadata: {name: aks-1}
spec:
  cloud: {azure: {subscriptionId: s, resourceGroup: rg}}
  pools:
    - {name: general, channel: general, nodeSelector: {kubernetes.azure.com/agentpool: general}, group: {aksAgentPool: general}}
"#;
        let fleet = rota_core::fleet::load_files(&[
            rota_core::fleet::SourceFile::new("fleet.yaml", text),
            rota_core::fleet::SourceFile::new("clusters/aks-1.yaml", cluster),
        ])
        .unwrap();
        let mut c = Catalog {
            require_published: true,
            ..Catalog::default()
        };
        for i in images_of(&fleet) {
            c.publish(i);
        }
        use rota_core::fleet::owner::ManagedGroup;
        let gke = ManagedGroup::GkeNodePool {
            project: "acme".into(),
            location: "europe-west1".into(),
            gke_cluster: "c".into(),
            node_pool: "general".into(),
        };
        let aks = ManagedGroup::AksAgentPool {
            subscription_id: "s".into(),
            resource_group: "rg".into(),
            aks_cluster: "c".into(),
            agent_pool: "general".into(),
        };
        for (pool, image) in [
            (gke, "1.31.5-gke.1023000/COS_CONTAINERD"),
            (aks, "AKSUbuntu-2204gen2containerd-202611.02.0"),
        ] {
            let g = GroupRef::Managed(pool);
            assert_eq!(c.launch_error(&g, image), None, "{image}");
            assert!(c.launch_error(&g, "not-published").is_some());
        }
    }

    #[test]
    fn a_repos_images_are_named_as_its_sources_find_them() {
        let text = include_str!("../../../tests/fixtures/fleet/valid/images-per-region.yaml");
        let fleet =
            rota_core::fleet::load_files(&[rota_core::fleet::SourceFile::new("fleet.yaml", text)])
                .unwrap();
        let mut c = Catalog::default();
        for i in images_of(&fleet) {
            c.publish(i);
        }
        for (region, name, value) in parameters_of(&fleet) {
            c.set_parameter(&region, &name, &value);
        }
        // The fixture's source is the EKS parameter: it holds the newest version's AMI.
        let q = ImageQuery::AwsSsm {
            region: "us-east-1".into(),
            parameter: "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/arm64/standard/recommended/image_id".into(),
            arch: Arch::Arm64,
        };
        assert_eq!(c.find(&q).unwrap().id, "ami-0f9e8d7c6b5a40313");
        let fam = ImageQuery::GcpFamily {
            project: "acme".into(),
            family: "acme-general".into(),
            arch: Arch::X86_64,
        };
        assert_eq!(
            c.find(&fam).unwrap().id,
            "projects/acme/global/images/general-1-0-1"
        );
    }
}
