//! Conformance suite for `NodeGroups` providers: the contracts written on the trait, checked
//! against any provider that can create a group for the test.
//!
//! A provider plugs in by implementing [`Harness`]: make a group of a given size on a given
//! image, and let time pass so the cloud acts (boots, terminations). Each check is a generic
//! async function; the simulated cloud runs them all below. Real providers (moto for AWS, ...)
//! add a harness of their own and call the same checks.

use std::sync::Arc;
use std::time::Duration;

use rota::cloud::{CloudErrorKind, GroupRef, Lifecycle, NodeGroups, provider_id};
use rota::sim::cloud::{GroupSpec, SimCloud};
use rota::sim::faults::FaultProfile;

/// What the suite needs from a provider under test.
#[async_trait::async_trait]
trait Harness: Send + Sync {
    type Provider: NodeGroups + ?Sized;
    fn provider(&self) -> Arc<Self::Provider>;
    /// The image the checks call `label` (`img-a`, `img-b`): the label itself in the
    /// simulated cloud, a registered AMI's ID in AWS.
    async fn image(&self, label: &str) -> String;
    /// A fresh group with `desired` running instances on image `label`, max `max`, min 0.
    async fn create_group(&self, name: &str, desired: u32, max: u32, label: &str) -> GroupRef {
        self.create_group_with_min(name, 0, desired, max, label)
            .await
    }
    /// The same with a minimum size.
    async fn create_group_with_min(
        &self,
        name: &str,
        min: u32,
        desired: u32,
        max: u32,
        label: &str,
    ) -> GroupRef;
    /// A group reference of the provider's cloud that does not exist.
    fn missing_group(&self) -> GroupRef;
    /// An image ID of the provider's shape that its cloud does not have.
    fn missing_image(&self) -> String {
        "ami-0123456789abcdef0".into()
    }
    /// Let the cloud act for `d` (boots, shutdowns).
    async fn pass(&self, d: Duration);
}

async fn check_image_knows_the_groups_image_and_not_a_missing_one<H: Harness>(h: &H) {
    use rota::cloud::{Arch, ImageCheck};
    let g = h.create_group("check", 1, 2, "img-a").await;
    let img = h.image("img-a").await;
    let p = h.provider();
    assert_eq!(
        p.check_image(&g, &img, Arch::X86_64).await.unwrap(),
        ImageCheck::Usable
    );
    let missing = h.missing_image();
    match p.check_image(&g, &missing, Arch::X86_64).await.unwrap() {
        ImageCheck::Unusable { reason, message } => {
            assert_eq!(reason, "ImageNotFound", "{message}");
            assert!(message.contains(&missing), "names the image: {message}");
        }
        ImageCheck::Usable => panic!("{missing} is not in the cloud"),
    }
    // Read-only: nothing about the group changed.
    let s = p.describe(&g).await.unwrap();
    assert_eq!((s.desired, s.template_image.as_str()), (1, img.as_str()));
}

async fn describe_reports_capacity_image_and_instances<H: Harness>(h: &H) {
    let g = h.create_group("describe", 2, 4, "img-a").await;
    let img_a = h.image("img-a").await;
    h.pass(Duration::from_secs(300)).await;
    let s = h.provider().describe(&g).await.unwrap();
    assert_eq!(s.group, g);
    assert_eq!((s.desired, s.min, s.max), (2, 0, 4));
    assert_eq!(s.template_image, img_a);
    assert_eq!(s.instances.len(), 2);
    for i in &s.instances {
        assert_eq!(i.image, img_a);
        assert!(!i.zone.is_empty());
        // AWS and GCP providerIDs carry the zone; Azure's name the scale set's VM only.
        if g.cloud() != rota::cloud::Cloud::Azure {
            assert_eq!(parsed_zone(&i.provider_id), i.zone);
        }
        assert_eq!(i.lifecycle, Lifecycle::InService);
        let parsed = provider_id::parse(&i.provider_id).expect("providerID in a cloud format");
        assert_eq!(parsed.cloud, g.cloud());
        assert_eq!(parsed.instance, i.id);
    }
}

async fn missing_group_is_not_found_for_every_call<H: Harness>(h: &H) {
    let g = h.missing_group();
    let p = h.provider();
    assert_eq!(
        p.describe(&g).await.unwrap_err().kind,
        CloudErrorKind::NotFound
    );
    assert_eq!(
        p.set_image(&g, "img").await.unwrap_err().kind,
        CloudErrorKind::NotFound
    );
    assert_eq!(
        p.set_capacity(&g, 1, None).await.unwrap_err().kind,
        CloudErrorKind::NotFound
    );
    assert_eq!(
        p.terminate(&g, "i-0", true).await.unwrap_err().kind,
        CloudErrorKind::NotFound
    );
}

async fn set_image_changes_new_instances_only_and_is_idempotent<H: Harness>(h: &H) {
    let g = h.create_group("image", 1, 3, "img-a").await;
    let (img_a, img_b) = (h.image("img-a").await, h.image("img-b").await);
    h.pass(Duration::from_secs(300)).await;
    let p = h.provider();
    p.set_image(&g, &img_b).await.unwrap();
    p.set_image(&g, &img_b).await.unwrap();
    let s = p.describe(&g).await.unwrap();
    assert_eq!(s.template_image, img_b);
    assert_eq!(
        s.instances[0].image, img_a,
        "running instances are untouched"
    );
    p.set_capacity(&g, 2, None).await.unwrap();
    h.pass(Duration::from_secs(300)).await;
    let s = p.describe(&g).await.unwrap();
    let mut images: Vec<_> = s.instances.iter().map(|i| i.image.clone()).collect();
    images.sort();
    let mut want = vec![img_a, img_b.clone()];
    want.sort();
    assert_eq!(images, want);
    // Back to the first image: a change like any other, then idempotent again.
    p.set_image(&g, &want[0]).await.unwrap();
    p.set_image(&g, &want[0]).await.unwrap();
    assert_eq!(p.describe(&g).await.unwrap().template_image, want[0]);
}

async fn set_capacity_respects_max_and_raises_it_when_asked<H: Harness>(h: &H) {
    let g = h.create_group("capacity", 2, 2, "img").await;
    let p = h.provider();
    let e = p.set_capacity(&g, 3, None).await.unwrap_err();
    assert_eq!(e.kind, CloudErrorKind::Invalid);
    assert_eq!(
        p.describe(&g).await.unwrap().desired,
        2,
        "a refused call changes nothing"
    );
    p.set_capacity(&g, 3, Some(3)).await.unwrap();
    p.set_capacity(&g, 3, Some(3)).await.unwrap();
    let s = p.describe(&g).await.unwrap();
    assert_eq!((s.desired, s.max), (3, 3));
    h.pass(Duration::from_secs(300)).await;
    assert_eq!(p.describe(&g).await.unwrap().instances.len(), 3);
    // Restoring the maximum after a surge.
    p.set_capacity(&g, 2, Some(2)).await.unwrap();
    h.pass(Duration::from_secs(300)).await;
    let s = p.describe(&g).await.unwrap();
    assert_eq!((s.desired, s.max, s.instances.len()), (2, 2, 2));
}

/// Restoring the maximum never writes a desired capacity (one read earlier could undo a
/// concurrent resize) and never sets the maximum below the desired capacity.
async fn set_max_leaves_the_desired_capacity<H: Harness>(h: &H) {
    let g = h.create_group("setmax", 2, 2, "img").await;
    let p = h.provider();
    p.set_capacity(&g, 3, Some(4)).await.unwrap();
    p.set_max(&g, 2).await.unwrap();
    let s = p.describe(&g).await.unwrap();
    assert_eq!(s.desired, 3, "set_max left the desired capacity alone");
    assert!(
        s.max >= 3,
        "the maximum {} is not below the desired 3",
        s.max
    );
    p.set_capacity(&g, 2, None).await.unwrap();
    p.set_max(&g, 3).await.unwrap();
    let s = p.describe(&g).await.unwrap();
    assert_eq!(s.desired, 2);
    assert!(s.max >= 2);
}

async fn terminate_with_decrement_shrinks_and_is_idempotent<H: Harness>(h: &H) {
    let g = h.create_group("terminate-dec", 3, 3, "img").await;
    h.pass(Duration::from_secs(300)).await;
    let p = h.provider();
    let victim = p.describe(&g).await.unwrap().instances[0].id.clone();
    p.terminate(&g, &victim, true).await.unwrap();
    p.terminate(&g, &victim, true).await.unwrap();
    let s = p.describe(&g).await.unwrap();
    assert_eq!(s.desired, 2, "decremented once, not twice");
    h.pass(Duration::from_secs(300)).await;
    let s = p.describe(&g).await.unwrap();
    assert_eq!(s.instances.len(), 2);
    assert!(
        s.instances.iter().all(|i| i.id != victim),
        "terminated ones are not listed"
    );
    p.terminate(&g, &victim, true).await.unwrap();
    assert_eq!(
        p.describe(&g).await.unwrap().desired,
        2,
        "gone instance: success, no change"
    );
    p.terminate(&g, "never-existed", true).await.unwrap();
}

async fn terminate_without_decrement_gets_a_replacement<H: Harness>(h: &H) {
    let g = h.create_group("terminate-keep", 2, 2, "img-a").await;
    let img_b = h.image("img-b").await;
    h.pass(Duration::from_secs(300)).await;
    let p = h.provider();
    p.set_image(&g, &img_b).await.unwrap();
    let victim = p.describe(&g).await.unwrap().instances[0].id.clone();
    p.terminate(&g, &victim, false).await.unwrap();
    let s = p.describe(&g).await.unwrap();
    assert_eq!(s.desired, 2);
    h.pass(Duration::from_secs(300)).await;
    let s = p.describe(&g).await.unwrap();
    assert_eq!(s.instances.len(), 2);
    assert!(s.instances.iter().all(|i| i.id != victim));
    assert!(
        s.instances.iter().any(|i| i.image == img_b),
        "replacement on the new image"
    );
}

async fn terminate_with_decrement_at_min_size_is_refused<H: Harness>(h: &H) {
    let g = h
        .create_group_with_min("terminate-min", 2, 2, 3, "img")
        .await;
    h.pass(Duration::from_secs(300)).await;
    let p = h.provider();
    let victim = p.describe(&g).await.unwrap().instances[0].id.clone();
    let e = p.terminate(&g, &victim, true).await.unwrap_err();
    assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
    let s = p.describe(&g).await.unwrap();
    assert_eq!(s.desired, 2, "a refused call changes nothing");
    assert!(
        s.instances
            .iter()
            .any(|i| i.id == victim && i.lifecycle == Lifecycle::InService),
        "the instance still runs"
    );
    // Without decrement the cloud replaces it, which the minimum allows.
    p.terminate(&g, &victim, false).await.unwrap();
    h.pass(Duration::from_secs(300)).await;
    let s = p.describe(&g).await.unwrap();
    assert_eq!((s.desired, s.instances.len()), (2, 2));
    assert!(s.instances.iter().all(|i| i.id != victim));
}

async fn set_capacity_below_the_minimum_is_invalid<H: Harness>(h: &H) {
    let g = h
        .create_group_with_min("capacity-min", 1, 2, 3, "img")
        .await;
    let p = h.provider();
    let e = p.set_capacity(&g, 0, None).await.unwrap_err();
    assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
    assert_eq!(p.describe(&g).await.unwrap().desired, 2, "nothing changed");
}

fn parsed_zone(provider_id: &str) -> String {
    provider_id::parse(provider_id)
        .map(|r| r.zone)
        .unwrap_or_default()
}

// --- the simulated cloud -------------------------------------------------------------------

struct SimHarness {
    cloud: SimCloud,
}

impl SimHarness {
    fn new() -> Self {
        let cloud = SimCloud::new(42, FaultProfile::default(), 1.0);
        cloud.spawn();
        // Every image the checks use is published (everywhere); others do not launch.
        cloud.require_published_images(true);
        SimHarness { cloud }
    }
}

#[async_trait::async_trait]
impl Harness for SimHarness {
    type Provider = SimCloud;

    fn provider(&self) -> Arc<SimCloud> {
        Arc::new(self.cloud.clone())
    }

    async fn image(&self, label: &str) -> String {
        self.cloud.publish_image(rota::sim::images::SimImage::new(
            label,
            &[],
            rota::cloud::Arch::X86_64,
        ));
        label.to_string()
    }

    async fn create_group_with_min(
        &self,
        name: &str,
        min: u32,
        desired: u32,
        max: u32,
        label: &str,
    ) -> GroupRef {
        let g = GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: name.into(),
        };
        let label = self.image(label).await;
        let mut spec = GroupSpec::new(g.clone(), desired, label).with_max(max);
        spec.min = min;
        self.cloud.create_group(spec).unwrap();
        g
    }

    fn missing_group(&self) -> GroupRef {
        GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: "no-such-group".into(),
        }
    }

    async fn pass(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }
}

/// One test per listed check, each on a fresh harness `$harness` (evaluated in the test, so
/// it may `.await`), under the test attribute given first.
macro_rules! conformance {
    (#[$test:meta] $harness:expr; $($check:ident),* $(,)?) => {$(
        #[$test]
        async fn $check() {
            crate::cloud_conformance::$check(&$harness).await;
        }
    )*};
}

mod sim {
    use super::SimHarness;
    conformance!(#[tokio::test(start_paused = true)] SimHarness::new();
        check_image_knows_the_groups_image_and_not_a_missing_one,
        describe_reports_capacity_image_and_instances,
        missing_group_is_not_found_for_every_call,
        set_image_changes_new_instances_only_and_is_idempotent,
        set_capacity_respects_max_and_raises_it_when_asked,
        set_max_leaves_the_desired_capacity,
        terminate_with_decrement_shrinks_and_is_idempotent,
        terminate_without_decrement_gets_a_replacement,
        terminate_with_decrement_at_min_size_is_refused,
        set_capacity_below_the_minimum_is_invalid,
    );
}

// --- AWS on moto -----------------------------------------------------------------------------

use crate::support::moto;

/// rota's AWS provider against a `moto_server` of its own. moto acts at once (instances are
/// InService as soon as they are asked for, gone as soon as they are terminated), so time
/// need not pass.
struct AwsHarness {
    moto: moto::Moto,
    provider: Arc<rota::cloud::aws::AwsNodeGroups>,
    ec2: aws_sdk_ec2::Client,
    asg: aws_sdk_autoscaling::Client,
    amis: tokio::sync::Mutex<std::collections::BTreeMap<String, String>>,
}

impl AwsHarness {
    async fn new() -> Self {
        let moto = moto::Moto::start();
        let provider = Arc::new(moto.node_groups().await);
        let (ec2, asg) = (moto.ec2().await, moto.asg().await);
        AwsHarness {
            moto,
            provider,
            ec2,
            asg,
            amis: Default::default(),
        }
    }
}

#[async_trait::async_trait]
impl Harness for AwsHarness {
    type Provider = rota::cloud::aws::AwsNodeGroups;

    fn provider(&self) -> Arc<Self::Provider> {
        self.provider.clone()
    }

    async fn image(&self, label: &str) -> String {
        let mut amis = self.amis.lock().await;
        if let Some(id) = amis.get(label) {
            return id.clone();
        }
        let id = moto::register_ami(&self.ec2, label).await;
        amis.insert(label.to_string(), id.clone());
        id
    }

    async fn create_group_with_min(
        &self,
        name: &str,
        min: u32,
        desired: u32,
        max: u32,
        label: &str,
    ) -> GroupRef {
        let ami = self.image(label).await;
        moto::create_group(&self.ec2, &self.asg, name, (min, desired, max), &ami).await;
        GroupRef::Aws {
            region: moto::REGION.into(),
            auto_scaling_group: name.into(),
        }
    }

    fn missing_group(&self) -> GroupRef {
        GroupRef::Aws {
            region: moto::REGION.into(),
            auto_scaling_group: "no-such-group".into(),
        }
    }

    async fn pass(&self, _d: Duration) {
        // moto has nothing in flight; still, make sure it is alive for the next check.
        assert!(!self.moto.url.is_empty());
    }
}

mod aws_on_moto {
    use super::AwsHarness;
    conformance!(#[tokio::test] AwsHarness::new().await;
        check_image_knows_the_groups_image_and_not_a_missing_one,
        describe_reports_capacity_image_and_instances,
        missing_group_is_not_found_for_every_call,
        set_image_changes_new_instances_only_and_is_idempotent,
        set_capacity_respects_max_and_raises_it_when_asked,
        set_max_leaves_the_desired_capacity,
        terminate_with_decrement_shrinks_and_is_idempotent,
        terminate_without_decrement_gets_a_replacement,
        terminate_with_decrement_at_min_size_is_refused,
        set_capacity_below_the_minimum_is_invalid,
    );
}

// --- Azure: the provider against an HTTP double of the ARM compute API ----------------------

use crate::support::azure_double;

mod azure {
    use std::sync::Arc;
    use std::time::Duration;

    use async_trait::async_trait;
    use azure_core::credentials::{AccessToken, TokenCredential, TokenRequestOptions};
    use rota::cloud::azure::arm::LroOptions;
    use rota::cloud::azure::{AzureNodeGroups, AzureOptions};
    use rota::cloud::retry::RetryPolicy;
    use rota::cloud::{CloudError, CloudErrorKind, GroupRef, GroupState, Lifecycle, NodeGroups};
    use serde_json::json;

    use super::Harness;
    use super::azure_double::{AzureDouble, Fault, TOKEN};

    const SUB: &str = "1b2c3d4e-0000-4000-8000-000000000001";
    const RG: &str = "MC_prod_weu_westeurope";
    const GALLERY: &str = "/subscriptions/1b2c3d4e-0000-4000-8000-000000000001/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/node/versions/";

    /// A credential that always hands out the double's token (the real one is workload
    /// identity, which needs Entra ID).
    #[derive(Debug)]
    struct FixedToken(&'static str);

    #[async_trait]
    impl TokenCredential for FixedToken {
        async fn get_token(
            &self,
            scopes: &[&str],
            _: Option<TokenRequestOptions<'_>>,
        ) -> azure_core::Result<AccessToken> {
            assert_eq!(scopes, ["https://management.azure.com/.default"]);
            Ok(AccessToken::new(
                self.0.to_string(),
                azure_core::time::OffsetDateTime::now_utc() + azure_core::time::Duration::hours(1),
            ))
        }
    }

    /// Quick retries and polls: the double's clock moves on each poll, not with real time.
    fn options(url: &str) -> AzureOptions {
        AzureOptions {
            endpoint: url.to_string(),
            retry: RetryPolicy {
                max_attempts: 4,
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(20),
                throttle_floor: Duration::from_millis(2),
                call_timeout: Duration::from_secs(10),
            },
            lro: LroOptions {
                poll_interval: Duration::from_millis(1),
                min_poll_interval: Duration::ZERO,
                max_poll_interval: Duration::from_millis(1),
                timeout: Duration::from_secs(60),
            },
        }
    }

    fn provider(double: &AzureDouble, token: &'static str) -> AzureNodeGroups {
        AzureNodeGroups::new(Arc::new(FixedToken(token)), options(&double.url)).unwrap()
    }

    /// The suite names images symbolically (`img-a`); on Azure they are gallery image
    /// versions. This adapter maps names to IDs on the way in and back on the way out, and
    /// passes every call to the real provider unchanged otherwise.
    pub struct Aliased(pub AzureNodeGroups);

    fn to_azure(image: &str) -> String {
        if image.starts_with('/') || image.contains(':') {
            image.to_string()
        } else {
            format!("{GALLERY}{image}")
        }
    }

    fn from_azure(image: &str) -> String {
        image.strip_prefix(GALLERY).unwrap_or(image).to_string()
    }

    #[async_trait]
    impl NodeGroups for Aliased {
        async fn describe(&self, group: &GroupRef) -> Result<GroupState, CloudError> {
            let mut s = self.0.describe(group).await?;
            s.template_image = from_azure(&s.template_image);
            for i in &mut s.instances {
                i.image = from_azure(&i.image);
            }
            Ok(s)
        }
        async fn check_image(
            &self,
            group: &GroupRef,
            image: &str,
            arch: rota::cloud::Arch,
        ) -> Result<rota::cloud::ImageCheck, CloudError> {
            self.0.check_image(group, &to_azure(image), arch).await
        }
        async fn set_image(&self, group: &GroupRef, image: &str) -> Result<(), CloudError> {
            self.0.set_image(group, &to_azure(image)).await
        }
        async fn set_capacity(
            &self,
            group: &GroupRef,
            desired: u32,
            max: Option<u32>,
        ) -> Result<(), CloudError> {
            self.0.set_capacity(group, desired, max).await
        }
        async fn set_max(&self, group: &GroupRef, max: u32) -> Result<(), CloudError> {
            self.0.set_max(group, max).await
        }
        async fn terminate(
            &self,
            group: &GroupRef,
            instance_id: &str,
            decrement: bool,
        ) -> Result<(), CloudError> {
            self.0.terminate(group, instance_id, decrement).await
        }
    }

    pub struct AzureHarness {
        pub double: AzureDouble,
    }

    impl AzureHarness {
        pub async fn new() -> Self {
            AzureHarness {
                double: AzureDouble::start().await,
            }
        }
    }

    fn group(name: &str) -> GroupRef {
        GroupRef::Azure {
            subscription_id: SUB.into(),
            resource_group: RG.into(),
            scale_set: name.into(),
        }
    }

    #[async_trait]
    impl Harness for AzureHarness {
        type Provider = Aliased;

        fn provider(&self) -> Arc<Aliased> {
            Arc::new(Aliased(provider(&self.double, TOKEN)))
        }

        async fn image(&self, label: &str) -> String {
            // The harness's provider maps labels to gallery image IDs and back.
            label.to_string()
        }

        async fn create_group_with_min(
            &self,
            name: &str,
            min: u32,
            desired: u32,
            max: u32,
            image: &str,
        ) -> GroupRef {
            // The provider does not enforce a minimum yet (see docs/cloud-azure.md), so the
            // min-size checks are not in this harness's list.
            assert_eq!(min, 0, "minimum sizes are not modelled for Azure");
            self.double.create_scale_set(
                SUB,
                RG,
                name,
                u64::from(desired),
                max,
                json!({ "id": to_azure(image) }),
                "Manual",
            );
            group(name)
        }

        fn missing_group(&self) -> GroupRef {
            group("no-such-vmss")
        }

        async fn pass(&self, d: Duration) {
            self.double.pass(d);
        }
    }

    conformance!(#[tokio::test] AzureHarness::new().await;
        describe_reports_capacity_image_and_instances,
        missing_group_is_not_found_for_every_call,
        set_image_changes_new_instances_only_and_is_idempotent,
        set_capacity_respects_max_and_raises_it_when_asked,
        set_max_leaves_the_desired_capacity,
        terminate_with_decrement_shrinks_and_is_idempotent,
        terminate_without_decrement_gets_a_replacement,
    );

    // --- Azure specifics ---------------------------------------------------------------------

    async fn one_group(desired: u64, max: u32) -> (AzureHarness, AzureNodeGroups, GroupRef) {
        let h = AzureHarness::new().await;
        h.double.create_scale_set(
            SUB,
            RG,
            "general",
            desired,
            max,
            json!({ "id": format!("{GALLERY}1.0.0") }),
            "Manual",
        );
        h.double.pass(Duration::from_secs(300));
        let p = provider(&h.double, TOKEN);
        (h, p, group("general"))
    }

    /// `rota images discover` on Azure: the gallery image's versions are listed (every page,
    /// `nextLink` followed) and the newest that succeeded, is not excluded from latest and
    /// targets every region asked is taken; none is NotFound, naming the regions.
    #[tokio::test]
    async fn a_gallery_gives_its_newest_version_replicated_where_needed() {
        use rota::cloud::{Arch, CloudErrorKind, ImageQuery, NodeGroups};
        let h = AzureHarness::new().await;
        let p = provider(&h.double, TOKEN);
        let gi = format!(
            "/subscriptions/{SUB}/resourceGroups/images/providers/Microsoft.Compute/galleries/acme/images/general"
        );
        let both = ["West Europe", "North Europe"];
        let add = |name: &str, published: &str, state: (&str, bool), regions: &[&str]| {
            h.double
                .add_gallery_version(&gi, name, published, state, regions)
        };
        add(
            "2026.11.1",
            "2026-11-03T08:00:00.0000000+00:00",
            ("Succeeded", false),
            &both,
        );
        let v2 = add(
            "2026.11.2",
            "2026-11-20T08:00:00.0000000+00:00",
            ("Succeeded", false),
            &both,
        );
        add(
            "2026.11.3",
            "2026-11-22T08:00:00.0000000+00:00",
            ("Succeeded", false),
            &["West Europe"],
        );
        add(
            "2026.11.4",
            "2026-11-23T08:00:00.0000000+00:00",
            ("Succeeded", true),
            &both,
        );
        add(
            "2026.11.5",
            "2026-11-24T08:00:00.0000000+00:00",
            ("Creating", false),
            &both,
        );
        let q = |regions: &[&str]| ImageQuery::AzureGallery {
            gallery_image: gi.clone(),
            regions: regions.iter().map(|r| r.to_string()).collect(),
            arch: Arch::X86_64,
        };
        let found = p
            .find_image(&q(&["westeurope", "northeurope"]))
            .await
            .unwrap();
        assert_eq!(
            (found.id.as_str(), found.name.as_str()),
            (v2.as_str(), "2026.11.2")
        );
        let found = p.find_image(&q(&["westeurope"])).await.unwrap();
        assert_eq!(found.name, "2026.11.3", "five versions over three pages");
        let e = p.find_image(&q(&["eastus"])).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::NotFound, "{e}");
        assert!(
            e.message
                .contains("replicated to eastus (5 versions listed)"),
            "{e}"
        );
        let e = p
            .find_image(&ImageQuery::AzureGallery {
                gallery_image: gi.replace("general", "missing"),
                regions: vec![],
                arch: Arch::X86_64,
            })
            .await
            .unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::NotFound, "{e}");
    }

    #[tokio::test]
    async fn throttling_that_clears_is_retried_under_the_policy() {
        let (h, p, g) = one_group(2, 4).await;
        h.double.inject(Fault {
            method: "GET",
            path_contains: "/virtualMachineScaleSets/general",
            status: 429,
            code: "TooManyRequests",
            message: "The request is being throttled as the limit has been reached for operation type - Read_30Min.",
            retry_after: Some(1),
            times: 2,
        });
        let before = h.double.count("GET", "/virtualMachineScaleSets/general");
        let s = p.describe(&g).await.unwrap();
        assert_eq!(s.desired, 2);
        // Two 429s, then the answer; the VM list after it.
        assert_eq!(
            h.double.count("GET", "/virtualMachineScaleSets/general") - before,
            4,
            "3 attempts at the scale set and 1 list page"
        );
    }

    #[tokio::test]
    async fn throttling_that_persists_gives_up_as_throttled_naming_the_call() {
        let (h, p, g) = one_group(1, 4).await;
        h.double.inject(Fault {
            method: "GET",
            path_contains: "/virtualMachineScaleSets/general",
            status: 429,
            code: "TooManyRequests",
            message: "throttled",
            retry_after: Some(1),
            times: 100,
        });
        let e = p.describe(&g).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Throttled);
        assert_eq!(e.call, "VirtualMachineScaleSets_Get");
        assert!(e.message.contains("after 4 attempts"), "{e}");
        assert!(e.to_string().contains("general"), "{e}");
    }

    #[tokio::test]
    async fn transient_server_errors_are_retried() {
        let (h, p, g) = one_group(1, 4).await;
        h.double.inject(Fault {
            method: "GET",
            path_contains: "/virtualMachines",
            status: 503,
            code: "ServiceUnavailable",
            message: "The service is temporarily unavailable.",
            retry_after: None,
            times: 1,
        });
        assert_eq!(p.describe(&g).await.unwrap().instances.len(), 1);
    }

    #[tokio::test]
    async fn a_failed_operation_with_a_quota_error_is_quota_and_not_retried() {
        let (h, p, g) = one_group(2, 10).await;
        h.double.fail_next_operation(
            "QuotaExceeded",
            "Operation could not be completed as it results in exceeding approved standardDSv5Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: westeurope, Current Limit: 8, Current Usage: 8, Additional Required: 4.",
        );
        let e = p.set_capacity(&g, 3, None).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Quota, "{e}");
        assert_eq!(e.call, "VirtualMachineScaleSets_Update");
        assert!(
            e.message.contains("QuotaExceeded") && e.message.contains("quota"),
            "{e}"
        );
        assert!(e.to_string().contains("general"), "{e}");
        assert_eq!(
            h.double.count("PATCH", "/general"),
            1,
            "sent once, not retried"
        );
        assert_eq!(h.double.capacity(SUB, RG, "general"), 2, "nothing changed");
    }

    #[tokio::test]
    async fn a_quota_refusal_up_front_is_quota_too() {
        let (h, p, g) = one_group(2, 10).await;
        h.double.inject(Fault {
            method: "PATCH",
            path_contains: "/general",
            status: 409,
            code: "OperationNotAllowed",
            message: "Operation could not be completed as it results in exceeding approved Total Regional Cores quota.",
            retry_after: None,
            times: 1,
        });
        let e = p.set_capacity(&g, 5, None).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Quota, "{e}");
        assert_eq!(h.double.count("PATCH", "/general"), 1);
    }

    #[tokio::test]
    async fn missing_permissions_are_permission_errors() {
        let (h, p, g) = one_group(1, 4).await;
        h.double.inject(Fault {
            method: "POST",
            path_contains: "/delete",
            status: 403,
            code: "AuthorizationFailed",
            message: "The client 'rota' with object id '0000' does not have authorization to perform action 'Microsoft.Compute/virtualMachineScaleSets/delete/action' over scope '/subscriptions/x' or the scope is invalid.",
            retry_after: None,
            times: 1,
        });
        let victim = p.describe(&g).await.unwrap().instances[0].id.clone();
        let e = p.terminate(&g, &victim, true).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Permission, "{e}");
        assert_eq!(e.call, "VirtualMachineScaleSets_DeleteInstances");
        assert!(e.message.contains("delete/action"), "{e}");
        assert_eq!(h.double.count("POST", "/delete"), 1, "not retried");

        // A wrong token: ARM says 401, rota says Permission.
        let wrong = provider(&h.double, "not-the-token");
        let e = wrong.describe(&g).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Permission, "{e}");
        assert!(e.message.contains("InvalidAuthenticationToken"), "{e}");
    }

    #[tokio::test]
    async fn updates_wait_for_their_operation_to_finish() {
        let (h, p, g) = one_group(1, 4).await;
        p.set_capacity(&g, 3, None).await.unwrap();
        let (in_progress, done) = h.double.polls();
        assert!(in_progress >= 1, "polled while the operation ran");
        assert_eq!(done, 1);
        // The scale-out operation ends when the new instances have booted.
        let s = p.describe(&g).await.unwrap();
        assert_eq!(s.instances.len(), 3);
        assert!(
            s.instances
                .iter()
                .all(|i| i.lifecycle == Lifecycle::InService)
        );
        // An unchanged capacity sends nothing.
        p.set_capacity(&g, 3, None).await.unwrap();
        assert_eq!(h.double.count("PATCH", "/general"), 1);
    }

    #[tokio::test]
    async fn a_failed_operation_of_unknown_cause_is_transient() {
        let (h, p, g) = one_group(1, 4).await;
        h.double.fail_next_operation(
            "InternalExecutionError",
            "An internal execution error occurred.",
        );
        let next = format!("{GALLERY}2.0.0");
        let e = p.set_image(&g, &next).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Transient, "{e}");
        // Calling again is safe and finishes the job.
        p.set_image(&g, &next).await.unwrap();
        assert_eq!(p.describe(&g).await.unwrap().template_image, next);
    }

    #[tokio::test]
    async fn instances_are_pending_while_they_boot() {
        let h = AzureHarness::new().await;
        h.double.create_scale_set(
            SUB,
            RG,
            "booting",
            2,
            4,
            json!({ "id": format!("{GALLERY}1.0.0") }),
            "Manual",
        );
        let p = provider(&h.double, TOKEN);
        let s = p.describe(&group("booting")).await.unwrap();
        assert_eq!(s.instances.len(), 2);
        assert!(
            s.instances
                .iter()
                .all(|i| i.lifecycle == Lifecycle::Pending)
        );
        h.double.pass(Duration::from_secs(300));
        let s = p.describe(&group("booting")).await.unwrap();
        assert!(
            s.instances
                .iter()
                .all(|i| i.lifecycle == Lifecycle::InService)
        );
    }

    #[tokio::test]
    async fn describe_reads_every_page_with_zones_and_provider_ids() {
        let (_h, p, g) = one_group(5, 10).await;
        let s = p.describe(&g).await.unwrap();
        assert_eq!(s.instances.len(), 5, "three pages of two");
        assert_eq!(s.template_image, format!("{GALLERY}1.0.0"));
        let mut zones: Vec<_> = s.instances.iter().map(|i| i.zone.as_str()).collect();
        zones.sort();
        zones.dedup();
        assert_eq!(zones, ["westeurope-1", "westeurope-2", "westeurope-3"]);
        assert_eq!(
            s.instances[0].provider_id,
            format!(
                "azure:///subscriptions/{SUB}/resourceGroups/{RG}/providers/Microsoft.Compute/virtualMachineScaleSets/general/virtualMachines/0"
            )
        );
    }

    #[tokio::test]
    async fn image_forms_fixed_at_creation_are_refused_before_touching_the_group() {
        let (h, p, g) = one_group(1, 4).await;
        // A gallery image moves to another gallery image version.
        let next = format!("{GALLERY}2.0.0");
        p.set_image(&g, &next).await.unwrap();
        assert_eq!(p.describe(&g).await.unwrap().template_image, next);
        // Resource IDs compare without case: the same image in other case is a no-op.
        p.set_image(&g, &next.to_ascii_lowercase()).await.unwrap();
        assert_eq!(h.double.count("PATCH", "/general"), 1);
        // Gallery -> marketplace would set publisher and offer, which Azure allows only when
        // the scale set is created: refused with the reason, nothing sent.
        let urn = "Canonical:ubuntu-24_04-lts:server:24.04.202611010";
        let e = p.set_image(&g, urn).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
        assert!(
            e.message.contains("publisher (none) -> Canonical")
                && e.message.contains("only when the scale set is created"),
            "{e}"
        );
        assert_eq!(h.double.count("PATCH", "/general"), 1, "nothing sent");
        assert_eq!(p.describe(&g).await.unwrap().template_image, next);
        let e = p.set_image(&g, "not-an-image").await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Invalid);
        assert!(e.message.contains("not-an-image"), "{e}");

        // A marketplace scale set changes sku and version, never its offer or publisher.
        h.double.create_scale_set(
            SUB,
            RG,
            "market",
            1,
            4,
            json!({"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "24.04.202610010"}),
            "Manual",
        );
        let m = group("market");
        p.set_image(&m, urn).await.unwrap();
        assert_eq!(p.describe(&m).await.unwrap().template_image, urn);
        let arm = "Canonical:ubuntu-24_04-lts:server-arm64:24.04.202611010";
        p.set_image(&m, arm).await.unwrap();
        assert_eq!(p.describe(&m).await.unwrap().template_image, arm);
        for (other, field) in [
            (
                "Canonical:0001-com-ubuntu-server-jammy:22_04-lts:22.04.202611010",
                "offer",
            ),
            (next.as_str(), "publisher Canonical -> (none)"),
        ] {
            let e = p.set_image(&m, other).await.unwrap_err();
            assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
            assert!(e.message.contains(field), "{e}");
        }
        assert_eq!(
            h.double.count("PATCH", "/market"),
            2,
            "only the allowed changes sent"
        );
    }

    #[tokio::test]
    async fn the_double_refuses_what_azure_refuses_and_rota_maps_it_to_invalid() {
        // Were rota to send a publisher change anyway (an older rota, another tool), ARM
        // answers 409 PropertyChangeNotAllowed: a request no retry fixes.
        use rota::cloud::azure::classify::classify;
        assert_eq!(
            classify(
                Some(409),
                "PropertyChangeNotAllowed",
                "Changing property 'imageReference.publisher' is not allowed."
            ),
            CloudErrorKind::Invalid
        );
    }

    #[tokio::test]
    async fn updates_answered_with_a_location_only_are_waited_for() {
        use super::azure_double::LroStyle;
        for status in [200, 202] {
            let (h, p, g) = one_group(1, 10).await;
            h.double.set_lro_style(LroStyle::Location(status));
            p.set_capacity(&g, 3, None).await.unwrap();
            let (in_progress, done) = h.double.polls();
            assert!(
                in_progress >= 1,
                "polled the Location while it ran (HTTP {status})"
            );
            assert_eq!(done, 1);
            let s = p.describe(&g).await.unwrap();
            assert!(
                s.instances.len() == 3
                    && s.instances
                        .iter()
                        .all(|i| i.lifecycle == Lifecycle::InService),
                "the call returned once the scale set had settled (HTTP {status}): {s:?}"
            );
            // A failure reported at the Location is the operation's failure.
            h.double.fail_next_operation(
                "QuotaExceeded",
                "Operation could not be completed as it results in exceeding approved standardDSv5Family Cores quota.",
            );
            let e = p.set_capacity(&g, 5, None).await.unwrap_err();
            assert_eq!(e.kind, CloudErrorKind::Quota, "{e}");
        }
    }

    #[tokio::test]
    async fn updates_answered_with_a_provisioning_state_only_are_waited_for() {
        use super::azure_double::LroStyle;
        let (h, p, g) = one_group(1, 4).await;
        h.double.set_lro_style(LroStyle::ProvisioningState);
        let reads = h.double.count("GET", "/virtualMachineScaleSets/general");
        p.set_capacity(&g, 3, None).await.unwrap();
        assert!(
            h.double.count("GET", "/virtualMachineScaleSets/general") - reads >= 2,
            "the scale set read again until its provisioningState left Updating"
        );
        let s = p.describe(&g).await.unwrap();
        assert!(
            s.instances
                .iter()
                .all(|i| i.lifecycle == Lifecycle::InService),
            "{s:?}"
        );
        // An update that leaves the scale set Failed is an error, not a success.
        h.double.fail_next_operation(
            "InternalExecutionError",
            "An internal execution error occurred.",
        );
        let e = p.set_capacity(&g, 4, None).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Transient, "{e}");
        assert!(e.message.contains("Failed"), "{e}");
    }

    #[tokio::test]
    async fn a_vm_whose_provisioning_failed_names_its_cause() {
        let (h, p, g) = one_group(2, 4).await;
        h.double.fail_next_vms(
            1,
            "AllocationFailed",
            "Allocation failed. We do not have sufficient capacity for the requested VM size in this region.",
        );
        // The scale-out's operation fails with the VM's cause...
        let e = p.set_capacity(&g, 3, None).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Quota, "{e}");
        assert!(e.message.contains("AllocationFailed"), "{e}");
        // ...and the VM stays, Failed; describe says why, per instance, for the planner.
        let s = p.describe(&g).await.unwrap();
        assert_eq!(s.instances.len(), 3);
        let failed: Vec<_> = s
            .instances
            .iter()
            .filter(|i| i.launch_error.is_some())
            .collect();
        assert_eq!(failed.len(), 1, "{s:#?}");
        let e = failed[0].launch_error.as_ref().unwrap();
        assert_eq!(
            (e.kind, e.code.as_str()),
            (CloudErrorKind::Quota, "AllocationFailed")
        );
        assert!(e.message.contains("sufficient capacity"), "{e}");
        assert_eq!(
            failed[0].lifecycle,
            Lifecycle::InService,
            "it exists and counts"
        );
        assert!(!failed[0].zone.is_empty());
        assert_eq!(
            h.double
                .count("GET", &format!("/virtualMachines/{}", failed[0].id)),
            1,
            "one instance view read, for the failed VM only"
        );
        // It can be removed like any instance.
        p.terminate(&g, &failed[0].id.clone(), true).await.unwrap();
        h.double.pass(Duration::from_secs(300));
        let s = p.describe(&g).await.unwrap();
        assert!(
            s.instances.iter().all(|i| i.launch_error.is_none()),
            "{s:#?}"
        );
    }

    #[tokio::test]
    async fn a_scale_set_that_would_roll_its_instances_is_refused() {
        let h = AzureHarness::new().await;
        h.double.create_scale_set(
            SUB,
            RG,
            "rolling",
            1,
            3,
            json!({ "id": format!("{GALLERY}1.0.0") }),
            "Automatic",
        );
        let p = provider(&h.double, TOKEN);
        let e = p
            .set_image(&group("rolling"), &format!("{GALLERY}2.0.0"))
            .await
            .unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Invalid);
        assert!(e.message.contains("Manual"), "{e}");
        assert_eq!(h.double.count("PATCH", "/rolling"), 0);
    }

    #[tokio::test]
    async fn raising_the_maximum_writes_the_autoscaler_tag_and_keeps_the_others() {
        let (h, p, g) = one_group(2, 2).await;
        p.set_capacity(&g, 3, Some(3)).await.unwrap();
        let tags = h.double.tags(SUB, RG, "general");
        assert_eq!(tags["max"], "3");
        assert_eq!(tags["aks-managed-poolName"], "general");
    }
}

// --- GCP: GcpNodeGroups against a double of the Compute Engine API ----------------------------

use crate::support::gcp_double;

use crate::support::api_schemas;

mod gcp {
    use std::sync::Arc;
    use std::time::Duration;

    use rota::cloud::gcp::{GcpCredentials, GcpNodeGroups, GcpOptions, ZONAL_MIG_LIMIT};
    use rota::cloud::retry::RetryPolicy;
    use rota::cloud::{CloudErrorKind, GroupRef, NodeGroups};

    use super::Harness;
    use super::gcp_double::{Fault, GcpDouble, MigSpec};

    const PROJECT: &str = "acme-prod";
    const ZONE: &str = "us-central1-a";
    const REGION: &str = "us-central1";

    /// Zonal groups with global templates, or regional groups with regional templates.
    pub struct GcpHarness {
        pub double: GcpDouble,
        provider: Arc<GcpNodeGroups>,
        regional: bool,
    }

    /// Retries as in production, with delays cut to milliseconds.
    fn fast_retries() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
            throttle_floor: Duration::from_millis(10),
            call_timeout: Duration::from_secs(10),
        }
    }

    impl GcpHarness {
        pub async fn new(regional: bool) -> Self {
            let double = GcpDouble::start().await;
            let provider = GcpNodeGroups::new(GcpOptions {
                endpoint: Some(double.url.clone()),
                credentials: GcpCredentials::Anonymous,
                retry: fast_retries(),
                poll_interval: Duration::from_millis(5),
                operation_timeout: Duration::from_secs(10),
            })
            .await
            .expect("GCP provider against the double");
            GcpHarness {
                double,
                provider: Arc::new(provider),
                regional,
            }
        }

        pub fn group(&self, name: &str) -> GroupRef {
            GroupRef::Gcp {
                project: PROJECT.into(),
                instance_group_manager: name.into(),
                zone: (!self.regional).then(|| ZONE.into()),
                region: self.regional.then(|| REGION.into()),
            }
        }

        pub fn spec(&self, name: &str, desired: u32, image: &str) -> MigSpec {
            MigSpec {
                project: PROJECT.into(),
                name: name.into(),
                zone: (!self.regional).then(|| ZONE.into()),
                region: self.regional.then(|| REGION.into()),
                target_size: desired,
                image: image.into(),
                autoscaler: None,
                regional_template: self.regional,
                update_policy: "OPPORTUNISTIC",
                autoscaler_mode: "OFF",
            }
        }

        /// Requests so far whose `METHOD path` contains `s`.
        pub fn count(&self, s: &str) -> usize {
            self.double
                .requests()
                .iter()
                .filter(|r| r.contains(s))
                .count()
        }
    }

    #[async_trait::async_trait]
    impl Harness for GcpHarness {
        type Provider = GcpNodeGroups;

        fn provider(&self) -> Arc<GcpNodeGroups> {
            self.provider.clone()
        }

        /// A MIG with an autoscaler in mode OFF: that is where a MIG keeps min and max.
        async fn image(&self, label: &str) -> String {
            label.to_string()
        }

        async fn create_group_with_min(
            &self,
            name: &str,
            min: u32,
            desired: u32,
            max: u32,
            image: &str,
        ) -> GroupRef {
            let mut spec = self.spec(name, desired, image);
            spec.autoscaler = Some((min, max));
            self.double.add_mig(&spec);
            self.group(name)
        }

        fn missing_group(&self) -> GroupRef {
            self.group("no-such-mig")
        }

        async fn pass(&self, d: Duration) {
            self.double.advance(d);
        }
    }

    mod zonal {
        conformance!(#[tokio::test] super::GcpHarness::new(false).await;
            describe_reports_capacity_image_and_instances,
            missing_group_is_not_found_for_every_call,
            set_image_changes_new_instances_only_and_is_idempotent,
            set_capacity_respects_max_and_raises_it_when_asked,
            set_max_leaves_the_desired_capacity,
            terminate_with_decrement_shrinks_and_is_idempotent,
            terminate_without_decrement_gets_a_replacement,
        );
    }

    mod regional {
        conformance!(#[tokio::test] super::GcpHarness::new(true).await;
            describe_reports_capacity_image_and_instances,
            missing_group_is_not_found_for_every_call,
            set_image_changes_new_instances_only_and_is_idempotent,
            set_capacity_respects_max_and_raises_it_when_asked,
            set_max_leaves_the_desired_capacity,
            terminate_with_decrement_shrinks_and_is_idempotent,
            terminate_without_decrement_gets_a_replacement,
        );
    }

    // --- GCP specifics: throttling, quota, permissions, long-running operations ---------------

    /// `rota images discover` on GCP: `images.getFromFamily` answers the family's newest
    /// image that is not deprecated; it must be READY and of the arch asked; an empty family
    /// is NotFound.
    #[tokio::test]
    async fn a_family_gives_its_newest_ready_image_of_the_arch() {
        use rota::cloud::{Arch, CloudErrorKind, ImageQuery, NodeGroups};
        let h = GcpHarness::new(false).await;
        let p = h.provider();
        let add = |name: &str,
                   family: &str,
                   created: &str,
                   status: &str,
                   dep: Option<&str>,
                   arch: &str| {
            h.double
                .add_family_image("acme-images", name, (family, created), status, dep, arch)
        };
        add(
            "general-2026-11-2",
            "general",
            "2026-11-10T08:00:00.000-08:00",
            "READY",
            None,
            "X86_64",
        );
        let newest = add(
            "general-2026-11-3",
            "general",
            "2026-11-20T08:00:00.000-08:00",
            "READY",
            None,
            "X86_64",
        );
        add(
            "general-2026-11-4",
            "general",
            "2026-11-24T08:00:00.000-08:00",
            "READY",
            Some("DEPRECATED"),
            "X86_64",
        );
        add(
            "other-9",
            "other",
            "2026-11-25T08:00:00.000-08:00",
            "READY",
            None,
            "X86_64",
        );
        let q = |family: &str, arch| ImageQuery::GcpFamily {
            project: "acme-images".into(),
            family: family.into(),
            arch,
        };
        let found = p.find_image(&q("general", Arch::X86_64)).await.unwrap();
        assert_eq!(found.id, newest);
        assert_eq!(found.name, "general-2026-11-3");
        assert_eq!(found.created.to_rfc3339(), "2026-11-20T16:00:00+00:00");
        let e = p.find_image(&q("general", Arch::Arm64)).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
        assert!(e.message.contains("is X86_64, not arm64"), "{e}");
        let e = p.find_image(&q("none", Arch::X86_64)).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::NotFound, "{e}");
        assert!(
            e.message
                .contains("image family acme-images/none has no image"),
            "{e}"
        );
        add(
            "pending-1",
            "pending",
            "2026-11-25T08:00:00.000-08:00",
            "PENDING",
            None,
            "X86_64",
        );
        let e = p.find_image(&q("pending", Arch::X86_64)).await.unwrap_err();
        assert!(e.message.contains("is PENDING, not READY"), "{e}");
    }

    /// `images.get` before the first surge: READY, not deprecated, the pool's architecture;
    /// anything else waits with the image's state in the message.
    #[tokio::test]
    async fn an_image_is_usable_only_when_ready_not_deprecated_and_of_the_pools_arch() {
        use rota::cloud::{Arch, ImageCheck};
        let h = GcpHarness::new(false).await;
        let g = h.create_group("images", 1, 3, "img").await;
        let p = h.provider();
        let reason = |c: ImageCheck| match c {
            ImageCheck::Usable => "Usable".to_string(),
            ImageCheck::Unusable { reason, .. } => reason,
        };
        let ready = h
            .double
            .add_image("acme-images", "general-2026-11-3", "READY", None, "X86_64");
        assert_eq!(
            reason(p.check_image(&g, &ready, Arch::X86_64).await.unwrap()),
            "Usable"
        );
        // A full URL names the same image.
        let url = format!("https://www.googleapis.com/compute/v1/{ready}");
        assert_eq!(
            reason(p.check_image(&g, &url, Arch::X86_64).await.unwrap()),
            "Usable"
        );
        assert_eq!(
            reason(p.check_image(&g, &ready, Arch::Arm64).await.unwrap()),
            "ImageWrongArch"
        );
        let pending = h.double.add_image(
            "acme-images",
            "general-2026-11-4",
            "PENDING",
            None,
            "X86_64",
        );
        assert_eq!(
            reason(p.check_image(&g, &pending, Arch::X86_64).await.unwrap()),
            "ImageNotReady"
        );
        let old = h.double.add_image(
            "acme-images",
            "general-2026-10-1",
            "READY",
            Some("DEPRECATED"),
            "X86_64",
        );
        assert_eq!(
            reason(p.check_image(&g, &old, Arch::X86_64).await.unwrap()),
            "ImageDeprecated"
        );
        let missing = "projects/acme-images/global/images/general-2099-1-1";
        match p.check_image(&g, missing, Arch::X86_64).await.unwrap() {
            ImageCheck::Unusable { reason, message } => {
                assert_eq!(reason, "ImageNotFound");
                assert!(message.contains(missing), "{message}");
            }
            ImageCheck::Usable => panic!("a missing image"),
        }
        assert_eq!(
            reason(p.check_image(&g, "not-a-path", Arch::X86_64).await.unwrap()),
            "ImageNotFound"
        );
        assert_eq!(h.count("GET projects/acme-images/global/images/"), 6);
    }

    #[tokio::test]
    async fn throttling_that_clears_is_retried_and_succeeds() {
        let h = GcpHarness::new(false).await;
        let g = h.create_group("throttled", 1, 3, "img").await;
        // Compute answers rate limits both as 429 and as 403 rateLimitExceeded, in the legacy
        // shape (errors[] only) and in the one Google's client reads first (error.details
        // with a google.rpc.ErrorInfo, errors[] then ignored): a 403 whose status says
        // PERMISSION_DENIED is still a rate limit.
        h.double
            .inject(Fault::new("/resize", 429, "rateLimitExceeded", 1));
        h.double
            .inject(Fault::new("/resize", 403, "rateLimitExceeded", 1));
        h.double.inject(Fault::rate_limited("/resize", 403, 1));
        h.provider().set_capacity(&g, 2, None).await.unwrap();
        assert_eq!(
            h.count("/resize"),
            4,
            "three throttled attempts, then the one that worked"
        );
        h.double.inject(Fault::rate_limited("/resize", 429, 1));
        // Details without an ErrorInfo (a Help link only): the status code still says so.
        h.double.inject(Fault {
            details: vec![serde_json::json!({"@type": "type.googleapis.com/google.rpc.Help",
                "links": [{"description": "Request a higher quota limit.", "url": "https://cloud.google.com/docs/quotas/help/request_increase"}]})],
            rpc_status: Some("RESOURCE_EXHAUSTED"),
            ..Fault::new("/resize", 429, "rateLimitExceeded", 1)
        });
        h.provider().set_capacity(&g, 3, Some(3)).await.unwrap();
        assert_eq!(h.count("/resize"), 7);
        assert_eq!(h.provider().describe(&g).await.unwrap().desired, 3);
        h.provider().set_capacity(&g, 2, None).await.unwrap();
        assert_eq!(h.provider().describe(&g).await.unwrap().desired, 2);
    }

    #[tokio::test]
    async fn throttling_that_persists_gives_up_as_throttled() {
        let h = GcpHarness::new(false).await;
        let g = h.create_group("throttled-long", 1, 3, "img").await;
        h.double.inject(Fault::new(
            "instanceGroupManagers/throttled-long",
            429,
            "rateLimitExceeded",
            100,
        ));
        let e = h.provider().describe(&g).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Throttled);
        assert!(e.message.contains("after 4 attempts"), "{e}");
        assert_eq!(h.count("instanceGroupManagers/throttled-long"), 4);
    }

    #[tokio::test]
    async fn server_errors_are_retried() {
        let h = GcpHarness::new(true).await;
        let g = h.create_group("flaky", 3, 3, "img").await;
        h.double
            .inject(Fault::new("/listManagedInstances", 503, "backendError", 2));
        let s = h.provider().describe(&g).await.unwrap();
        assert_eq!(s.instances.len(), 3, "all pages read after the retries");
    }

    #[tokio::test]
    async fn quota_in_an_operation_is_quota_and_not_retried() {
        let h = GcpHarness::new(false).await;
        let g = h.create_group("quota", 1, 5, "img").await;
        h.double.fail_next_operation(
            "/resize",
            "QUOTA_EXCEEDED",
            "Quota 'CPUS' exceeded.  Limit: 24.0 in region us-central1.",
            403,
        );
        let e = h.provider().set_capacity(&g, 4, None).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Quota, "{e}");
        assert_eq!(e.call, "instanceGroupManagers.resize");
        let shown = e.to_string();
        assert!(
            shown.contains("gcp:acme-prod/us-central1-a/mig/quota"),
            "names the group: {shown}"
        );
        assert!(
            shown.contains("QUOTA_EXCEEDED") && shown.contains("CPUS"),
            "{shown}"
        );
        assert_eq!(h.count("/resize"), 1, "quota is not retried");
        assert_eq!(h.provider().describe(&g).await.unwrap().desired, 1);
    }

    #[tokio::test]
    async fn a_stock_out_in_an_operation_is_quota() {
        let h = GcpHarness::new(true).await;
        let g = h.create_group("stockout", 1, 5, "img-a").await;
        h.double.fail_next_operation(
            "/instanceTemplates",
            "ZONE_RESOURCE_POOL_EXHAUSTED",
            "The zone 'projects/acme-prod/zones/us-central1-b' does not have enough resources available to fulfill the request.",
            503,
        );
        let e = h.provider().set_image(&g, "img-b").await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Quota, "{e}");
        assert_eq!(e.call, "regionInstanceTemplates.insert");
    }

    #[tokio::test]
    async fn permission_denied_is_permission_and_not_retried() {
        let h = GcpHarness::new(false).await;
        let g = h.create_group("forbidden", 1, 3, "img").await;
        h.double.inject(Fault {
            method: Some("POST"),
            message: "Required 'compute.instanceGroupManagers.update' permission for 'projects/acme-prod/zones/us-central1-a/instanceGroupManagers/forbidden'".into(),
            details: vec![serde_json::json!({"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "IAM_PERMISSION_DENIED", "domain": "iam.googleapis.com",
                "metadata": {"permission": "compute.instanceGroupManagers.update",
                             "resource": "projects/acme-prod/zones/us-central1-a/instanceGroupManagers/forbidden"}})],
            ..Fault::new("/resize", 403, "forbidden", 1)
        });
        let e = h.provider().set_capacity(&g, 2, None).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Permission, "{e}");
        assert!(
            e.message.contains("compute.instanceGroupManagers.update"),
            "{e}"
        );
        assert_eq!(h.count("/resize"), 1);
    }

    #[tokio::test]
    async fn calls_wait_for_their_operations() {
        let h = GcpHarness::new(false).await;
        let g = h.create_group("lro", 1, 3, "img").await;
        h.double.set_polls_to_done(4);
        h.provider().set_capacity(&g, 2, None).await.unwrap();
        let requests = h.double.requests();
        let resize = requests.iter().position(|r| r.contains("/resize")).unwrap();
        let polls: Vec<_> = requests[resize + 1..]
            .iter()
            .filter(|r| r.starts_with("GET projects/acme-prod/zones/us-central1-a/operations/"))
            .collect();
        assert_eq!(
            polls.len(),
            4,
            "PENDING, RUNNING, RUNNING, RUNNING, DONE: {requests:#?}"
        );
    }

    #[tokio::test]
    async fn set_image_after_a_crash_reuses_the_template_it_made() {
        let h = GcpHarness::new(false).await;
        let g = h
            .create_group("crash", 1, 3, "projects/acme/global/images/img-a")
            .await;
        // The template is made, then setInstanceTemplate keeps failing: the call fails...
        h.double
            .inject(Fault::new("/setInstanceTemplate", 503, "backendError", 4));
        let e = h
            .provider()
            .set_image(&g, "projects/acme/global/images/img-b")
            .await
            .unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Transient);
        let templates = h.double.template_names();
        // ... and the retried call finds the template by its name instead of making another.
        h.provider()
            .set_image(&g, "projects/acme/global/images/img-b")
            .await
            .unwrap();
        assert_eq!(h.double.template_names(), templates);
        assert_eq!(
            h.count("POST projects/acme-prod/global/instanceTemplates"),
            1
        );
        let s = h.provider().describe(&g).await.unwrap();
        assert_eq!(s.template_image, "projects/acme/global/images/img-b");
    }

    #[tokio::test]
    async fn regional_groups_get_regional_templates() {
        let h = GcpHarness::new(true).await;
        let g = h.create_group("regional-tpl", 1, 3, "img-a").await;
        h.provider().set_image(&g, "img-b").await.unwrap();
        let made: Vec<_> = h
            .double
            .template_names()
            .into_iter()
            .filter(|t| t.contains("rota-"))
            .collect();
        assert_eq!(made.len(), 1);
        assert!(
            made[0].starts_with(
                "projects/acme-prod/regions/us-central1/instanceTemplates/rota-regional-tpl-img-b-"
            ),
            "{made:?}"
        );
    }

    #[tokio::test]
    async fn without_an_autoscaler_max_is_computes_limit_and_max_is_not_settable() {
        let h = GcpHarness::new(false).await;
        h.double.add_mig(&h.spec("plain", 2, "img"));
        let g = h.group("plain");
        let p = h.provider();
        let s = p.describe(&g).await.unwrap();
        assert_eq!((s.desired, s.min, s.max), (2, 0, ZONAL_MIG_LIMIT));
        p.set_capacity(&g, 3, Some(3)).await.unwrap();
        let s = p.describe(&g).await.unwrap();
        assert_eq!((s.desired, s.max), (3, ZONAL_MIG_LIMIT));
        let e = p
            .set_capacity(&g, ZONAL_MIG_LIMIT + 1, None)
            .await
            .unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Invalid);
    }

    #[tokio::test]
    async fn instances_booting_are_pending_and_deleting_ones_terminating() {
        use rota::cloud::Lifecycle;
        let h = GcpHarness::new(false).await;
        let g = h.create_group("life", 1, 3, "img").await;
        let p = h.provider();
        p.set_capacity(&g, 2, None).await.unwrap();
        let s = p.describe(&g).await.unwrap();
        let mut l: Vec<_> = s.instances.iter().map(|i| i.lifecycle).collect();
        l.sort_by_key(|l| format!("{l:?}"));
        assert_eq!(l, [Lifecycle::InService, Lifecycle::Pending]);
        let victim = s
            .instances
            .iter()
            .find(|i| i.lifecycle == Lifecycle::InService)
            .unwrap()
            .id
            .clone();
        p.terminate(&g, &victim, true).await.unwrap();
        let s = p.describe(&g).await.unwrap();
        let v = s.instances.iter().find(|i| i.id == victim).unwrap();
        assert_eq!(v.lifecycle, Lifecycle::Terminating);
        assert!(v.provider_id.starts_with("gce://acme-prod/us-central1-a/"));
    }

    // --- what Compute reports per instance, and groups that would fight the rotation ------

    #[tokio::test]
    async fn a_stock_out_shows_per_instance_after_the_resize_is_done_and_is_quota() {
        use rota::cloud::Lifecycle;
        for regional in [false, true] {
            let h = GcpHarness::new(regional).await;
            let g = h.create_group("stockout-mi", 1, 5, "img").await;
            let p = h.provider();
            h.double.stock_out(
                "",
                "ZONE_RESOURCE_POOL_EXHAUSTED",
                "The zone 'projects/acme-prod/zones/us-central1-a' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.",
            );
            // Compute accepts the resize and reports it DONE: the creations are scheduled.
            p.set_capacity(&g, 3, None).await.unwrap();
            h.double.advance(Duration::from_secs(600));
            let s = p.describe(&g).await.unwrap();
            assert_eq!(s.desired, 3);
            let failing: Vec<_> = s
                .instances
                .iter()
                .filter(|i| i.launch_error.is_some())
                .collect();
            assert_eq!(failing.len(), 2, "{s:#?}");
            for i in &failing {
                assert_eq!(i.lifecycle, Lifecycle::Pending, "still CREATING");
                let e = i.launch_error.as_ref().unwrap();
                assert_eq!(e.kind, CloudErrorKind::Quota, "{e}");
                assert_eq!(e.code, "ZONE_RESOURCE_POOL_EXHAUSTED");
                assert!(e.message.contains("does not have enough resources"), "{e}");
                assert!(
                    i.zone.starts_with("us-central1-"),
                    "the zone is named: {i:?}"
                );
            }
            // Capacity comes back: the group's retries succeed, the error is gone.
            h.double.end_stock_out();
            h.double.advance(Duration::from_secs(300));
            let s = p.describe(&g).await.unwrap();
            assert_eq!(s.instances.len(), 3);
            assert!(
                s.instances
                    .iter()
                    .all(|i| i.launch_error.is_none() && i.lifecycle == Lifecycle::InService),
                "{s:#?}"
            );
        }
    }

    #[tokio::test]
    async fn a_quota_shortage_shows_per_instance_naming_the_quota() {
        let h = GcpHarness::new(false).await;
        let g = h.create_group("quota-mi", 1, 5, "img").await;
        let p = h.provider();
        h.double.stock_out(
            ZONE,
            "QUOTA_EXCEEDED",
            "Quota 'CPUS' exceeded.  Limit: 24.0 in region us-central1.",
        );
        p.set_capacity(&g, 2, None).await.unwrap();
        let s = p.describe(&g).await.unwrap();
        let e = s
            .instances
            .iter()
            .find_map(|i| i.launch_error.clone())
            .expect("the new instance reports its failed creation");
        assert_eq!(e.kind, CloudErrorKind::Quota);
        assert_eq!(e.code, "QUOTA_EXCEEDED");
        assert!(e.to_string().contains("Quota 'CPUS' exceeded"), "{e}");
        // Stalled, like a quota refusal of a call: the planner pauses the pool on it.
        use rota::errors::Classify;
        assert_eq!(e.kind.classify().class, rota::errors::Class::Stalled);
    }

    #[tokio::test]
    async fn a_proactive_group_is_refused_before_anything_is_written() {
        let h = GcpHarness::new(false).await;
        let spec = super::gcp_double::MigSpec {
            update_policy: "PROACTIVE",
            ..h.spec("proactive", 2, "img-a")
        };
        let key = h.double.add_mig(&spec);
        let g = h.group("proactive");
        let p = h.provider();
        let before = h.double.instances(&key);
        let e = p.set_image(&g, "img-b").await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
        assert!(
            e.message.contains("PROACTIVE") && e.message.contains("OPPORTUNISTIC"),
            "{e}"
        );
        assert_eq!(e.call, "instanceGroupManagers.setInstanceTemplate");
        assert_eq!(h.count("/setInstanceTemplate"), 0);
        assert_eq!(
            h.count("POST projects/acme-prod/global/instanceTemplates"),
            0
        );
        assert_eq!(h.double.instances(&key), before, "no instance replaced");
        // The same image again is no change, and no refusal: nothing would be written.
        p.set_image(&g, "img-a").await.unwrap();
        // What rota refuses to do, the double does as Compute would: a new template on a
        // PROACTIVE group replaces its running instances, without any drain.
        let tpl = h.double.add_template(PROJECT, None, "other", "img-b");
        let (status, _) = h.double.serve_direct(
            "POST",
            &format!("{key}/setInstanceTemplate"),
            serde_json::json!({"instanceTemplate": format!("https://www.googleapis.com/compute/v1/{tpl}")}),
        );
        assert_eq!(status, 200);
        let after = h.double.instances(&key);
        assert!(
            before
                .iter()
                .all(|(n, _)| after.iter().any(|(m, deleting)| m == n && *deleting)),
            "Compute deletes the old instances itself: {after:?}"
        );
    }

    #[tokio::test]
    async fn an_autoscaler_that_acts_on_the_group_is_refused_before_anything_is_written() {
        for (regional, mode) in [(true, "ON"), (false, "ONLY_SCALE_OUT")] {
            let h = GcpHarness::new(regional).await;
            let spec = super::gcp_double::MigSpec {
                autoscaler: Some((0, 5)),
                autoscaler_mode: mode,
                ..h.spec("autoscaled", 2, "img-a")
            };
            h.double.add_mig(&spec);
            let g = h.group("autoscaled");
            let p = h.provider();
            let e = p.set_capacity(&g, 3, Some(4)).await.unwrap_err();
            assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
            assert!(
                e.message.contains(&format!("mode {mode}")) && e.message.contains("OFF"),
                "{e}"
            );
            let e = p.set_image(&g, "img-b").await.unwrap_err();
            assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
            assert_eq!(h.count("/resize"), 0);
            assert_eq!(h.count("PATCH"), 0, "the autoscaler's maximum untouched");
            assert_eq!(h.count("/setInstanceTemplate"), 0);
            // Reading the group, restoring its maximum and removing an instance stay allowed:
            // they are what undoing a rotation needs.
            let s = p.describe(&g).await.unwrap();
            assert_eq!((s.desired, s.max), (2, 5));
            p.set_max(&g, 5).await.unwrap();
            if regional {
                // And Compute itself refuses the manual resize of such a regional group.
                let key =
                    format!("projects/{PROJECT}/regions/{REGION}/instanceGroupManagers/autoscaled");
                let (status, body) = h.double.serve_direct(
                    "POST",
                    &format!("{key}/resize?size=3"),
                    serde_json::Value::Null,
                );
                assert_eq!(status, 412, "{body}");
            }
        }
    }

    /// The headline of per-instance launch failures, through the real controller: a surge
    /// that GCP cannot create (the resize is DONE, the instance stays CREATING with a
    /// stock-out in lastAttempt) is a shortfall that heals as capacity frees, so rota waits
    /// it out within nodeReadyTimeout and replaces it (nodeReadyRetries) saying it waits;
    /// when the retries are spent the batch is undone and the pool paused naming zone and
    /// code, and the image is not blamed.
    #[tokio::test]
    async fn a_rotation_meeting_a_lasting_stock_out_waits_then_pauses_naming_zone_and_code() {
        stock_out_rotation(None).await;
    }

    /// The same stock-out ending while rota waits: the rotation finishes on its own, no
    /// person asked for.
    #[tokio::test]
    async fn a_rotation_meeting_a_stock_out_that_ends_finishes_by_itself() {
        stock_out_rotation(Some(3)).await;
    }

    /// A rotation of a three-node group through a stock-out in every zone; `ends_after`:
    /// the stock-out ends after that many controller passes (None: it lasts).
    async fn stock_out_rotation(ends_after: Option<usize>) {
        use std::collections::BTreeMap;

        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        use kube::api::{Api, PostParams};
        use rota::cloud::Lifecycle;
        use rota::controller::{Config, Controller};
        use rota::fleet::duration::GoDuration;
        use rota::fleet::resolved::{BatchSize, Cloud, EffectivePolicy};
        use rota::kube::crd::{self, NodePoolRotation, NodePoolRotationSpec};
        use rota::rotate::Phase;
        use rota::sim::faults::FaultProfile;
        use rota::sim::registrar::ExternalCluster;
        use rota::sim::scenario::{ClusterScenario, PoolScenario, Scenario, WorkloadProfile};

        const SPEED: f64 = 30.0;
        let (old, new) = (
            "projects/acme-images/global/images/node-2026-11-1",
            "projects/acme-images/global/images/node-2026-11-2",
        );
        let h = GcpHarness::new(false).await;
        let key = h.double.add_mig(&h.spec("general", 3, old));
        // The new image is published (READY): the check before the first surge passes.
        h.double
            .add_image("acme-images", "node-2026-11-2", "READY", None, "X86_64");
        let g = h.group("general");
        let provider: Arc<dyn NodeGroups> = h.provider();
        let scenario = Scenario {
            clusters: vec![ClusterScenario {
                name: "gke-1".into(),
                cloud: Cloud::Gcp,
                pools: vec![PoolScenario {
                    name: "general".into(),
                    group: g.clone(),
                    image: old.into(),
                    node_selector: BTreeMap::from([("rota.dev/pool".into(), "general".into())]),
                    nodes: 3,
                }],
            }],
            workloads: WorkloadProfile::from_yaml(
                "nodes: {perPool: 3, registerAfter: 15s, readyAfter: 20s}\ndeployments:\n  - {name: web, namespace: shop, replicas: 3, pdb: {maxUnavailable: 1}, readyAfter: 10s}\n",
                "workloads",
            )
            .unwrap(),
            faults: FaultProfile::default(),
            seed: 1,
        };
        let cluster =
            ExternalCluster::start(&scenario.clusters[0], &scenario, provider.clone(), SPEED)
                .await
                .unwrap();
        let client = rota::kube::sim::client(cluster.store.clone());
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &crd::definition())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        // Every zone of the group is out of the machine type from now on.
        h.double.stock_out(
            "",
            "ZONE_RESOURCE_POOL_EXHAUSTED",
            "The zone 'projects/acme-prod/zones/us-central1-a' does not have enough resources available to fulfill the request.  Try a different zone, or try again later.",
        );
        let mut policy = EffectivePolicy {
            batch: BatchSize::Count(1),
            ..EffectivePolicy::default()
        };
        policy.node_ready_timeout = GoDuration::from_secs(60);
        policy.node_ready_retries = 1;
        let npr = crate::support::sim_fleet::npr(NodePoolRotationSpec {
            cluster: "gke-1".into(),
            ..crate::support::sim_fleet::spec("general", g.clone(), "rota.dev/pool", new, policy)
        });
        Api::<NodePoolRotation>::all(client.clone())
            .create(&PostParams::default(), &npr)
            .await
            .unwrap();
        let mut cfg = Config::new("0.1.0", "gcp-test");
        cfg.events = false;
        cfg.speed = SPEED;
        let mut c = Controller::new(client.clone(), provider.clone(), cfg);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        let mut log = String::new();
        let mut waits_seen = Vec::new();
        let mut passes = 0;
        let (phase, message) = loop {
            let out = c.step().await;
            if !out.is_empty() {
                log.push_str(&format!("{out:?}\n"));
            }
            passes += 1;
            if ends_after == Some(passes) {
                h.double.end_stock_out();
            }
            // The group's own clock: 20 s of cloud time per pass.
            h.double.advance(Duration::from_secs(20));
            let st = Api::<NodePoolRotation>::all(client.clone())
                .get("general")
                .await
                .unwrap()
                .status;
            if let Some(note) = st.as_ref().and_then(|s| s.stop.clone()) {
                log.push_str(&format!("stop: {}\n", note.line()));
                waits_seen.push(note);
            }
            if let Some(st) = st.filter(|s| matches!(s.phase, Phase::Paused | Phase::Succeeded)) {
                break (st.phase, st.message);
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "neither paused nor finished in time\n{log}"
            );
            c.wait(tokio::time::Instant::now() + Duration::from_secs(1), true)
                .await;
        };
        // While the stock-out lasted the pool said rota waits, nothing for a person to do.
        let before_end = match ends_after {
            Some(_) => waits_seen.len(),
            None => waits_seen.len().saturating_sub(1),
        };
        assert!(
            waits_seen[..before_end]
                .iter()
                .all(|n| n.by == rota::rotate::stop::MovedBy::Rota),
            "{log}"
        );
        assert!(
            waits_seen
                .iter()
                .any(|n| n.by == rota::rotate::stop::MovedBy::Rota),
            "never said it waits\n{log}"
        );
        if ends_after.is_some() {
            assert_eq!(phase, Phase::Succeeded, "{message}\n{log}");
            let s = provider.describe(&g).await.unwrap();
            assert_eq!(s.template_image, new, "{log}");
            assert!(
                s.instances
                    .iter()
                    .filter(|i| i.lifecycle == Lifecycle::InService)
                    .all(|i| i.image == new),
                "{s:#?}"
            );
            return;
        }
        assert_eq!(phase, Phase::Paused);
        assert!(
            message.contains("ZONE_RESOURCE_POOL_EXHAUSTED")
                && message.contains("in zone us-central1-a")
                && message.contains("the cloud had no capacity")
                && !message.contains("did not boot"),
            "{message}\n{log}"
        );
        let last = waits_seen.last().expect("a stop note on the pause");
        assert_eq!(last.by, rota::rotate::stop::MovedBy::Person, "{log}");
        // Undone: the template back on the image the pool came from, the target size back to
        // three, no instance left trying to be created.
        h.double.advance(Duration::from_secs(120));
        let s = provider.describe(&g).await.unwrap();
        assert_eq!(s.template_image, old, "{log}");
        assert_eq!(s.desired, 3, "{log}");
        assert_eq!(s.instances.len(), 3, "{s:#?}");
        assert!(
            s.instances.iter().all(|i| i.image == old
                && i.lifecycle == Lifecycle::InService
                && i.launch_error.is_none()),
            "{s:#?}"
        );
        assert_eq!(h.double.target_size(&key), 3);
    }

    /// The schema check is not a formality: answers that drift from the published
    /// description in the ways a double could drift are caught, each named.
    #[test]
    fn the_schema_check_catches_answers_that_drift_from_the_description() {
        use super::api_schemas::{Api, Exchange, check};
        let x = |method: &str, path: &str, status: u16, response: serde_json::Value| Exchange {
            method: method.into(),
            path: path.into(),
            status,
            request: serde_json::Value::Null,
            response,
            headers: Vec::new(),
        };
        let list = "projects/p/zones/z/instanceGroupManagers/m/listManagedInstances";
        let good = serde_json::json!({"managedInstances": [{
            "instance": "https://www.googleapis.com/compute/v1/projects/p/zones/z/instances/m-1",
            "name": "m-1", "currentAction": "CREATING",
            "lastAttempt": {"errors": {"errors": [{"code": "ZONE_RESOURCE_POOL_EXHAUSTED", "message": "m"}]}}}]});
        assert_eq!(
            check(Api::Compute, &[x("POST", list, 200, good)]),
            Vec::<String>::new()
        );
        let drifted = [
            // lastAttempt.errors is an object holding `errors`, not a list.
            x(
                "POST",
                list,
                200,
                serde_json::json!({"managedInstances": [{"name": "m-1",
                "lastAttempt": {"errors": [{"code": "QUOTA_EXCEEDED"}]}}]}),
            ),
            // An enum value the description does not list.
            x(
                "POST",
                list,
                200,
                serde_json::json!({"managedInstances": [{"currentAction": "BOOTING"}]}),
            ),
            // ids are uint64 strings.
            x(
                "GET",
                "projects/p/zones/z/instanceGroupManagers/m",
                200,
                serde_json::json!({"id": 5}),
            ),
            // A reason google.api.ErrorReason does not have.
            x(
                "POST",
                "projects/p/zones/z/instanceGroupManagers/m/resize",
                403,
                serde_json::json!({"error": {
                "code": 403, "message": "m", "status": "PERMISSION_DENIED",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SLOW_DOWN", "domain": "googleapis.com"}]}}),
            ),
            // A status that does not go with the HTTP status.
            x(
                "GET",
                "projects/p/zones/z/instanceGroupManagers/m",
                404,
                serde_json::json!({"error": {
                "code": 404, "message": "m", "status": "UNAVAILABLE"}}),
            ),
            // No such method.
            x(
                "GET",
                "projects/p/zones/z/instanceGroupManagers/m/frobnicate",
                200,
                serde_json::json!({}),
            ),
        ];
        for d in &drifted {
            let problems = check(Api::Compute, std::slice::from_ref(d));
            assert_eq!(problems.len(), 1, "{} {}: {problems:?}", d.method, d.path);
        }
        let vmss = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/v?api-version=2024-07-01";
        let drifted = [
            x(
                "GET",
                vmss,
                200,
                serde_json::json!({"location": "westeurope", "properties": {"upgradePolicy": {"mode": "Sometimes"}}}),
            ),
            x(
                "GET",
                vmss,
                200,
                serde_json::json!({"location": "westeurope", "sku": {"capacity": "3"}}),
            ),
            x(
                "GET",
                vmss,
                200,
                serde_json::json!({"sku": {"capacity": 3}}),
            ),
            x(
                "GET",
                vmss,
                404,
                serde_json::json!({"code": "ResourceNotFound"}),
            ),
        ];
        for d in &drifted {
            let problems = check(Api::Arm, std::slice::from_ref(d));
            assert_eq!(problems.len(), 1, "{}: {problems:?}", d.response);
        }
        assert_eq!(
            check(
                Api::Arm,
                &[x(
                    "GET",
                    vmss,
                    200,
                    serde_json::json!({"location": "westeurope", "sku": {"capacity": 3}})
                )]
            ),
            Vec::<String>::new()
        );
    }
}
