//! The simulated Kubernetes side of a cluster whose machines live in a real cloud API (or an
//! emulator of one, such as moto): its kubelets register a Ready Node for every instance the
//! provider reports InService and remove the Node of every instance that is gone.
//!
//! Nothing here knows a cloud: [`ProviderObserver`] lets the simulated kubelets
//! ([`super::kubelet`]) see instances through any [`NodeGroups`] provider's `describe`, and
//! [`ExternalCluster::start`] runs one scenario cluster against it: its store (served to
//! kube-rs by [`super::apiserver`]), the disruption controller, the scheduler, workloads
//! and kubelets, exactly as [`super::world::Fleet`] does with the simulated cloud. The pools'
//! groups must already exist in the provider; Nodes carry the pool's `nodeSelector` labels,
//! the topology labels of the instance's zone, its providerID, and its image as
//! `status.nodeInfo.osImage`, as the simulated kubelet always writes them.

use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::watch;

use super::cloud::InstanceObserver;
use super::scenario::{ClusterScenario, Scenario};
use super::store::Store;
use super::world::{LoadError, World};
use rota_core::cloud::{CloudError, GroupRef, GroupState, NodeGroups};

/// Any provider's instances as the kubelets see them: `describe`, polled (a cloud API
/// cannot notify).
pub struct ProviderObserver(pub Arc<dyn NodeGroups>);

#[async_trait]
impl InstanceObserver for ProviderObserver {
    async fn observe(&self, group: &GroupRef) -> Result<GroupState, CloudError> {
        self.0.describe(group).await
    }

    fn changes(&self) -> Option<watch::Receiver<u64>> {
        None
    }
}

/// One simulated cluster following an external provider's instances. Its controllers stop
/// when it is dropped.
pub struct ExternalCluster {
    pub store: Store,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl ExternalCluster {
    /// Load `cluster` of `scenario` (workloads, PDBs, a Ready Node per InService instance of
    /// each pool's group in `provider`) and start its controllers. Delays (node registration
    /// and readiness, pod start, polling the provider) are divided by `speed`.
    pub async fn start(
        cluster: &ClusterScenario,
        scenario: &Scenario,
        provider: Arc<dyn NodeGroups>,
        speed: f64,
    ) -> Result<ExternalCluster, LoadError> {
        let observer: Arc<dyn InstanceObserver> = Arc::new(ProviderObserver(provider));
        let world = World::load(cluster, scenario, None, observer, speed).await?;
        let store = world.store.clone();
        let tasks = vec![super::pdb::spawn_controller(store.clone()), world.spawn()];
        Ok(ExternalCluster { store, tasks })
    }
}

impl Drop for ExternalCluster {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::{GroupSpec, SimCloud};
    use crate::faults::FaultProfile;
    use crate::scenario::{PoolScenario, WorkloadProfile};
    use crate::store::{ListOptions, ResourceType};
    use rota_core::cloud::Lifecycle;
    use rota_core::fleet::resolved::Cloud;
    use std::collections::BTreeMap;
    use std::time::Duration;

    /// With the simulated cloud standing in for an external provider: nodes appear for new
    /// instances and go with terminated ones, through `describe` only.
    #[tokio::test(start_paused = true)]
    async fn nodes_follow_the_providers_instances() {
        let cloud = SimCloud::new(1, FaultProfile::default(), 1.0);
        cloud.spawn();
        let group = GroupRef::Aws {
            region: "us-east-1".into(),
            auto_scaling_group: "general".into(),
        };
        cloud
            .create_group(
                GroupSpec::new(group.clone(), 2, "ami-1")
                    .with_max(3)
                    .prebooted(),
            )
            .unwrap();
        let selector = BTreeMap::from([("rota.dev/pool".to_string(), "general".to_string())]);
        let scenario = Scenario {
            clusters: vec![ClusterScenario {
                name: "ext".into(),
                cloud: Cloud::Aws,
                pools: vec![PoolScenario {
                    name: "general".into(),
                    group: group.clone(),
                    image: "ami-1".into(),
                    node_selector: selector,
                    nodes: 2,
                }],
            }],
            workloads: WorkloadProfile::from_yaml("nodes: {perPool: 2}", "w").unwrap(),
            faults: FaultProfile::default(),
            seed: 1,
        };
        let provider: Arc<dyn NodeGroups> = Arc::new(cloud.clone());
        let c = ExternalCluster::start(&scenario.clusters[0], &scenario, provider.clone(), 1.0)
            .await
            .unwrap();
        let nodes = || {
            let (items, _) = c
                .store
                .list(
                    &ResourceType::nodes(),
                    None,
                    &ListOptions::labels("rota.dev/pool=general"),
                )
                .unwrap();
            let mut pids: Vec<String> = items
                .iter()
                .map(|n| n["spec"]["providerID"].as_str().unwrap().to_string())
                .collect();
            pids.sort();
            pids
        };
        let ids = |s: &GroupState| {
            let mut v: Vec<String> = s
                .instances
                .iter()
                .filter(|i| i.lifecycle == Lifecycle::InService)
                .map(|i| i.provider_id.clone())
                .collect();
            v.sort();
            v
        };
        assert_eq!(nodes(), ids(&provider.describe(&group).await.unwrap()));
        provider.set_capacity(&group, 3, None).await.unwrap();
        tokio::time::sleep(Duration::from_secs(600)).await;
        let s = provider.describe(&group).await.unwrap();
        assert_eq!(s.instances.len(), 3);
        assert_eq!(nodes(), ids(&s));
        let victim = s.instances[0].id.clone();
        provider.terminate(&group, &victim, true).await.unwrap();
        tokio::time::sleep(Duration::from_secs(600)).await;
        let s = provider.describe(&group).await.unwrap();
        assert_eq!(s.instances.len(), 2);
        assert_eq!(nodes(), ids(&s));
    }
}
