//! The managed pools' owners a controller drives: one [`OwnerPools`] adapter per owner (the
//! simulated fleet's EKS, GKE and AKS), picked by the pool's `group`. A pool whose owner has
//! no adapter here is reported and never acted on.

use std::sync::Arc;

use rota_core::cloud::GroupRef;
use rota_core::cloud::managed::OwnerPools;

/// The adapters, at most one per owner (a later one for the same owner replaces it).
#[derive(Clone, Default)]
pub struct Owners(Vec<Arc<dyn OwnerPools>>);

impl Owners {
    /// Drive `owner`'s pools through it.
    pub fn add(&mut self, owner: Arc<dyn OwnerPools>) {
        self.0.retain(|o| o.owner() != owner.owner());
        self.0.push(owner);
    }

    /// The adapter of the owner of `group`, if it is a managed pool whose owner is driven.
    pub fn of(&self, group: &GroupRef) -> Option<&dyn OwnerPools> {
        let managed = group.managed()?;
        self.0
            .iter()
            .find(|o| o.owner() == managed.owner())
            .map(|o| o.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rota_core::cloud::CloudError;
    use rota_core::cloud::managed::{OwnerCapabilities, OwnerPoolState, UpdateRequest};
    use rota_core::fleet::owner::{ManagedGroup, Owner};

    /// An adapter that only says whose it is.
    struct Named(Owner);

    #[async_trait::async_trait]
    impl OwnerPools for Named {
        fn owner(&self) -> Owner {
            self.0
        }
        fn capabilities(&self) -> OwnerCapabilities {
            OwnerCapabilities::default()
        }
        async fn describe(&self, _: &ManagedGroup) -> Result<OwnerPoolState, CloudError> {
            unreachable!("not called")
        }
        async fn start_update(
            &self,
            _: &ManagedGroup,
            _: &UpdateRequest,
        ) -> Result<String, CloudError> {
            unreachable!("not called")
        }
    }

    /// Each pool gets its own owner's adapter; a self-managed group or an owner without
    /// one gets none.
    #[test]
    fn a_pool_gets_its_owners_adapter_and_only_that() {
        let mut owners = Owners::default();
        for o in [Owner::EksNodegroup, Owner::GkeNodePool, Owner::AksAgentPool] {
            owners.add(Arc::new(Named(o)));
        }
        let gke = GroupRef::Managed(ManagedGroup::GkeNodePool {
            project: "p".into(),
            location: "europe-west1".into(),
            gke_cluster: "c".into(),
            node_pool: "general".into(),
        });
        let aks = GroupRef::Managed(ManagedGroup::AksAgentPool {
            subscription_id: "s".into(),
            resource_group: "rg".into(),
            aks_cluster: "c".into(),
            agent_pool: "general".into(),
        });
        let karpenter = GroupRef::Managed(ManagedGroup::KarpenterNodePool {
            region: "us-east-1".into(),
            eks_cluster: "c".into(),
            node_pool: "default".into(),
        });
        let asg = GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: "g".into(),
        };
        assert_eq!(owners.of(&gke).map(|o| o.owner()), Some(Owner::GkeNodePool));
        assert_eq!(
            owners.of(&aks).map(|o| o.owner()),
            Some(Owner::AksAgentPool)
        );
        assert!(owners.of(&karpenter).is_none());
        assert!(owners.of(&asg).is_none());
        assert!(Owners::default().of(&gke).is_none());
    }
}
