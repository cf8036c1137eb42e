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
    /// Let the cloud act for `d` (boots, shutdowns).
    async fn pass(&self, d: Duration);
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
        assert_eq!(parsed_zone(&i.provider_id), i.zone);
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

macro_rules! sim_conformance {
    ($($check:ident),* $(,)?) => {$(
        #[tokio::test(start_paused = true)]
        async fn $check() {
            super::$check(&SimHarness::new()).await;
        }
    )*};
}

mod sim {
    use super::SimHarness;
    sim_conformance!(
        describe_reports_capacity_image_and_instances,
        missing_group_is_not_found_for_every_call,
        set_image_changes_new_instances_only_and_is_idempotent,
        set_capacity_respects_max_and_raises_it_when_asked,
        terminate_with_decrement_shrinks_and_is_idempotent,
        terminate_without_decrement_gets_a_replacement,
        terminate_with_decrement_at_min_size_is_refused,
        set_capacity_below_the_minimum_is_invalid,
    );
}

// --- AWS on moto -----------------------------------------------------------------------------

#[path = "support/moto.rs"]
mod moto;

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

macro_rules! aws_conformance {
    ($($check:ident),* $(,)?) => {$(
        #[tokio::test]
        async fn $check() {
            let h = AwsHarness::new().await;
            super::$check(&h).await;
        }
    )*};
}

mod aws_on_moto {
    use super::AwsHarness;
    aws_conformance!(
        describe_reports_capacity_image_and_instances,
        missing_group_is_not_found_for_every_call,
        set_image_changes_new_instances_only_and_is_idempotent,
        set_capacity_respects_max_and_raises_it_when_asked,
        terminate_with_decrement_shrinks_and_is_idempotent,
        terminate_without_decrement_gets_a_replacement,
        terminate_with_decrement_at_min_size_is_refused,
        set_capacity_below_the_minimum_is_invalid,
    );
}
