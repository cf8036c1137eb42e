//! One `NodeGroups` for a cluster whose pools may live in different clouds: each call goes to
//! the provider of its group's cloud, built on first use.
//!
//! Providers are built lazily because building one may do I/O (AWS loads its credential
//! chain and region configuration) and a cluster usually uses one cloud: an agent on EKS never
//! needs GCP credentials, and must not fail at start-up for lack of them. A cloud with no
//! provider configured answers every call with a `Permission`-class error naming the cloud, so
//! the pool pauses and says why instead of the agent crashing.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::future::BoxFuture;
use tokio::sync::OnceCell;

use super::{Cloud, CloudError, CloudErrorKind, GroupRef, GroupState, NodeGroups};

/// Builds a provider for one cloud; called at most once (successfully).
pub type Factory =
    Box<dyn Fn() -> BoxFuture<'static, Result<Arc<dyn NodeGroups>, String>> + Send + Sync>;

struct Slot {
    factory: Factory,
    built: OnceCell<Arc<dyn NodeGroups>>,
}

/// Dispatches each call on the group's cloud.
#[derive(Default)]
pub struct Providers {
    slots: BTreeMap<Cloud, Slot>,
}

impl Providers {
    pub fn new() -> Self {
        Self::default()
    }

    /// Use `factory` for groups of `cloud` (replacing any earlier one).
    pub fn with(mut self, cloud: Cloud, factory: Factory) -> Self {
        self.slots.insert(
            cloud,
            Slot {
                factory,
                built: OnceCell::new(),
            },
        );
        self
    }

    /// The clouds that have a provider.
    pub fn clouds(&self) -> impl Iterator<Item = Cloud> + '_ {
        self.slots.keys().copied()
    }

    async fn provider(
        &self,
        group: &GroupRef,
        call: &'static str,
    ) -> Result<&Arc<dyn NodeGroups>, CloudError> {
        // A managed pool's template is its owner's (EKS marks a node group whose ASG
        // template rota wrote DEGRADED; GKE and AKS undo or refuse the edit): no call on
        // the self-managed path ever reaches a provider for one.
        if let Some(m) = group.managed() {
            return Err(CloudError::about(
                CloudErrorKind::Invalid,
                call,
                &group.to_string(),
                format!(
                    "{} {} is a managed pool: rota changes it only through {}'s API, never as a self-managed group",
                    m.owner().group_key(),
                    m.name(),
                    m.owner().service()
                ),
            ));
        }
        self.provider_of(group.cloud(), call, group.to_string())
            .await
    }

    /// The provider of `cloud`, built on first use; `subject` names what the call was for
    /// (a group, or an image query) in its error.
    async fn provider_of(
        &self,
        cloud: Cloud,
        call: &'static str,
        subject: String,
    ) -> Result<&Arc<dyn NodeGroups>, CloudError> {
        let fail = |kind, message: String| CloudError::about(kind, call, &subject, message);
        let Some(slot) = self.slots.get(&cloud) else {
            return Err(fail(
                CloudErrorKind::Permission,
                format!(
                    "this agent has no {cloud} provider configured (see docs/cloud-providers.md)"
                ),
            ));
        };
        // A failed build is not cached: credentials mounted late (a projected token that
        // appears after start-up) are picked up on the next call.
        slot.built
            .get_or_try_init(|| (slot.factory)())
            .await
            .map_err(|e| {
                fail(
                    CloudErrorKind::Permission,
                    format!("cannot set up the {cloud} provider: {e}"),
                )
            })
    }
}

#[async_trait]
impl NodeGroups for Providers {
    async fn describe(&self, group: &GroupRef) -> Result<GroupState, CloudError> {
        self.provider(group, "DescribeGroup")
            .await?
            .describe(group)
            .await
    }

    async fn check_image(
        &self,
        group: &GroupRef,
        image: &str,
        arch: rota_core::cloud::Arch,
    ) -> Result<rota_core::cloud::ImageCheck, CloudError> {
        self.provider(group, "CheckImage")
            .await?
            .check_image(group, image, arch)
            .await
    }

    async fn find_image(
        &self,
        query: &rota_core::cloud::ImageQuery,
    ) -> Result<rota_core::cloud::FoundImage, CloudError> {
        self.provider_of(query.cloud(), "FindImage", query.to_string())
            .await?
            .find_image(query)
            .await
    }

    async fn set_image(&self, group: &GroupRef, image: &str) -> Result<(), CloudError> {
        self.provider(group, "SetTemplateImage")
            .await?
            .set_image(group, image)
            .await
    }

    async fn set_capacity(
        &self,
        group: &GroupRef,
        desired: u32,
        max: Option<u32>,
    ) -> Result<(), CloudError> {
        self.provider(group, "SetDesiredCapacity")
            .await?
            .set_capacity(group, desired, max)
            .await
    }

    async fn set_max(&self, group: &GroupRef, max: u32) -> Result<(), CloudError> {
        self.provider(group, "SetMaxSize")
            .await?
            .set_max(group, max)
            .await
    }

    async fn terminate(
        &self,
        group: &GroupRef,
        instance_id: &str,
        decrement: bool,
    ) -> Result<(), CloudError> {
        self.provider(group, "TerminateInstance")
            .await?
            .terminate(group, instance_id, decrement)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rota_sim::cloud::{GroupSpec, SimCloud};
    use rota_sim::faults::FaultProfile;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn aws() -> GroupRef {
        GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: "general".into(),
        }
    }

    fn gcp() -> GroupRef {
        GroupRef::Gcp {
            project: "acme".into(),
            instance_group_manager: "general".into(),
            zone: Some("us-central1-a".into()),
            region: None,
        }
    }

    #[tokio::test]
    async fn calls_go_to_the_groups_cloud_and_the_provider_is_built_once() {
        let sim = Arc::new(SimCloud::new(7, FaultProfile::default(), 1.0));
        sim.create_group(GroupSpec::new(aws(), 1, "ami-1")).unwrap();
        let builds = Arc::new(AtomicU32::new(0));
        let (b, s) = (builds.clone(), sim.clone());
        let p = Providers::new().with(
            Cloud::Aws,
            Box::new(move || {
                b.fetch_add(1, Ordering::SeqCst);
                let s: Arc<dyn NodeGroups> = s.clone();
                Box::pin(async move { Ok(s) })
            }),
        );
        assert_eq!(p.describe(&aws()).await.unwrap().template_image, "ami-1");
        p.set_image(&aws(), "ami-2").await.unwrap();
        assert_eq!(p.describe(&aws()).await.unwrap().template_image, "ami-2");
        assert_eq!(builds.load(Ordering::SeqCst), 1);

        let e = p.describe(&gcp()).await.unwrap_err();
        assert_eq!(e.kind, CloudErrorKind::Permission);
        assert!(e.message.contains("no gcp provider"), "{e}");
    }

    /// A managed pool never reaches a self-managed provider: no template write, no
    /// capacity change, not even a describe, and the provider is not built for it.
    #[tokio::test]
    async fn a_managed_pool_never_reaches_a_provider() {
        let builds = Arc::new(AtomicU32::new(0));
        let b = builds.clone();
        let sim = Arc::new(SimCloud::new(7, FaultProfile::default(), 1.0));
        sim.create_group(GroupSpec::new(aws(), 1, "ami-1")).unwrap();
        let p = Providers::new().with(
            Cloud::Aws,
            Box::new(move || {
                b.fetch_add(1, Ordering::SeqCst);
                let s: Arc<dyn NodeGroups> = sim.clone();
                Box::pin(async move { Ok(s) })
            }),
        );
        let ng = GroupRef::Managed(rota_core::fleet::owner::ManagedGroup::EksNodegroup {
            region: "us-east-1".into(),
            eks_cluster: "prod".into(),
            nodegroup: "general".into(),
        });
        let errors = [
            p.describe(&ng).await.unwrap_err(),
            p.set_image(&ng, "ami-2").await.unwrap_err(),
            p.set_capacity(&ng, 3, Some(4)).await.unwrap_err(),
            p.set_max(&ng, 4).await.unwrap_err(),
            p.terminate(&ng, "i-1", true).await.unwrap_err(),
        ];
        for e in errors {
            assert_eq!(e.kind, CloudErrorKind::Invalid, "{e}");
            assert!(
                e.message.contains("eksNodegroup general is a managed pool")
                    && e.message.contains("EKS's API"),
                "{e}"
            );
        }
        assert_eq!(builds.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_failed_build_is_reported_and_retried_on_the_next_call() {
        let attempts = Arc::new(AtomicU32::new(0));
        let a = attempts.clone();
        let p = Providers::new().with(
            Cloud::Gcp,
            Box::new(move || {
                let n = a.fetch_add(1, Ordering::SeqCst);
                Box::pin(async move {
                    if n == 0 {
                        Err("no credentials found".to_string())
                    } else {
                        let sim = Arc::new(SimCloud::new(1, FaultProfile::default(), 1.0));
                        sim.create_group(GroupSpec::new(gcp(), 0, "img")).unwrap();
                        Ok(sim as Arc<dyn NodeGroups>)
                    }
                })
            }),
        );
        let e = p.describe(&gcp()).await.unwrap_err();
        assert!(e.message.contains("no credentials found"), "{e}");
        assert_eq!(p.describe(&gcp()).await.unwrap().template_image, "img");
        assert_eq!(attempts.load(Ordering::SeqCst), 2);
    }
}
