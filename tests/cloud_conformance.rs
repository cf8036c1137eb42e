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
    /// A fresh group with `desired` running instances on `image`, max `max`, min 0.
    async fn create_group(&self, name: &str, desired: u32, max: u32, image: &str) -> GroupRef;
    /// A group reference of the provider's cloud that does not exist.
    fn missing_group(&self) -> GroupRef;
    /// Let the cloud act for `d` (boots, shutdowns).
    async fn pass(&self, d: Duration);
}

async fn describe_reports_capacity_image_and_instances<H: Harness>(h: &H) {
    let g = h.create_group("describe", 2, 4, "img-a").await;
    h.pass(Duration::from_secs(300)).await;
    let s = h.provider().describe(&g).await.unwrap();
    assert_eq!(s.group, g);
    assert_eq!((s.desired, s.min, s.max), (2, 0, 4));
    assert_eq!(s.template_image, "img-a");
    assert_eq!(s.instances.len(), 2);
    for i in &s.instances {
        assert_eq!(i.image, "img-a");
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
    h.pass(Duration::from_secs(300)).await;
    let p = h.provider();
    p.set_image(&g, "img-b").await.unwrap();
    p.set_image(&g, "img-b").await.unwrap();
    let s = p.describe(&g).await.unwrap();
    assert_eq!(s.template_image, "img-b");
    assert_eq!(
        s.instances[0].image, "img-a",
        "running instances are untouched"
    );
    p.set_capacity(&g, 2, None).await.unwrap();
    h.pass(Duration::from_secs(300)).await;
    let s = p.describe(&g).await.unwrap();
    let mut images: Vec<_> = s.instances.iter().map(|i| i.image.as_str()).collect();
    images.sort();
    assert_eq!(images, ["img-a", "img-b"]);
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
    h.pass(Duration::from_secs(300)).await;
    let p = h.provider();
    p.set_image(&g, "img-b").await.unwrap();
    let victim = p.describe(&g).await.unwrap().instances[0].id.clone();
    p.terminate(&g, &victim, false).await.unwrap();
    let s = p.describe(&g).await.unwrap();
    assert_eq!(s.desired, 2);
    h.pass(Duration::from_secs(300)).await;
    let s = p.describe(&g).await.unwrap();
    assert_eq!(s.instances.len(), 2);
    assert!(s.instances.iter().all(|i| i.id != victim));
    assert!(
        s.instances.iter().any(|i| i.image == "img-b"),
        "replacement on the new image"
    );
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

    async fn create_group(&self, name: &str, desired: u32, max: u32, image: &str) -> GroupRef {
        let g = GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: name.into(),
        };
        self.cloud
            .create_group(GroupSpec::new(g.clone(), desired, image).with_max(max))
            .unwrap();
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
    );
}
