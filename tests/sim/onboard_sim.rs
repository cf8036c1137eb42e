//! `rota clusters import` against the simulated fleet, in process: a simulated cluster's
//! groups (an EKS managed node group and self-managed Auto Scaling groups) read back from
//! the simulated cloud, written as `clusters/<name>.yaml` into a fleet repo, validated and
//! resolved to the very groups and node labels the cluster runs; a second import writes
//! the same bytes.

use std::collections::BTreeMap;

use rota::cloud::{Cloud, GroupRef};
use rota::fleet::owner::ManagedGroup;
use rota::sim::cloud::{GroupSpec, SimCloud};
use rota::sim::faults::FaultProfile;
use rota::sim::scenario::{ClusterScenario, PoolScenario};
use rota_core::onboard::{FoundCluster, Outcome, outcome};

const AMI: &str = "ami-0a1b2c3d4e5f60718";

fn pool(name: &str, group: GroupRef, labels: &[(&str, &str)]) -> PoolScenario {
    PoolScenario {
        name: name.into(),
        group,
        image: AMI.into(),
        node_selector: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        nodes: 2,
    }
}

fn asg(name: &str) -> GroupRef {
    GroupRef::Aws {
        region: "us-east-1".into(),
        auto_scaling_group: name.into(),
    }
}

fn cluster() -> ClusterScenario {
    ClusterScenario {
        name: "sim-use1".into(),
        cloud: Cloud::Aws,
        pools: vec![
            pool(
                "general",
                GroupRef::Managed(ManagedGroup::EksNodegroup {
                    region: "us-east-1".into(),
                    eks_cluster: "sim-eks".into(),
                    nodegroup: "general".into(),
                }),
                &[("eks.amazonaws.com/nodegroup", "general")],
            ),
            pool("gpu", asg("sim-use1-gpu"), &[("pool", "gpu")]),
            pool("batch", asg("sim-use1-batch"), &[("pool", "batch")]),
        ],
    }
}

async fn found(cloud: &SimCloud, c: &ClusterScenario) -> FoundCluster {
    let (section, pools) = rota::sim::onboard::cluster_pools(cloud, c).await.unwrap();
    FoundCluster {
        name: c.name.clone(),
        labels: BTreeMap::from([("ring".into(), "early".into())]),
        cloud: section,
        channel: "general".into(),
        pools,
        read_only: true,
        command: "rota clusters import sim-use1 --cloud sim".into(),
    }
}

#[tokio::test(start_paused = true)]
async fn an_imported_simulated_cluster_validates_and_resolves_to_its_own_groups() {
    let cloud = SimCloud::new(7, FaultProfile::default(), 1.0);
    let c = cluster();
    for p in &c.pools {
        cloud
            .create_group(GroupSpec::new(p.group.clone(), p.nodes, p.image.clone()).prebooted())
            .unwrap();
    }
    let f = found(&cloud, &c).await;
    let repo = tempfile::tempdir().unwrap();
    crate::support::example_repo::copy_to(repo.path());
    let file = repo.path().join("clusters/sim-use1.yaml");
    let Outcome::New { text } = outcome("clusters/sim-use1.yaml", None, &f).unwrap() else {
        panic!("no file yet")
    };
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, &text).unwrap();
    assert!(
        text.contains("# simulated EKS managed node group general of cluster sim-eks"),
        "{text}"
    );
    assert!(
        text.contains("aws: {region: us-east-1, eksCluster: sim-eks}"),
        "{text}"
    );

    let fleet = rota::fleet::load_dir(repo.path())
        .unwrap_or_else(|d| panic!("the imported file does not validate:\n{d}\n{text}"));
    let desired = fleet.resolve_cluster("sim-use1").unwrap();
    let mut got: Vec<(GroupRef, BTreeMap<String, String>)> = desired
        .pools
        .iter()
        .map(|p| (p.group.clone(), p.node_selector.clone()))
        .collect();
    let mut want: Vec<(GroupRef, BTreeMap<String, String>)> = c
        .pools
        .iter()
        .map(|p| (p.group.clone(), p.node_selector.clone()))
        .collect();
    got.sort_by_key(|(g, _)| g.to_string());
    want.sort_by_key(|(g, _)| g.to_string());
    assert_eq!(got, want, "{text}");

    // Again, from the same cloud: the same bytes.
    let again = found(&cloud, &c).await;
    assert_eq!(
        outcome("clusters/sim-use1.yaml", Some(&text), &again).unwrap(),
        Outcome::Unchanged
    );
}

#[tokio::test(start_paused = true)]
async fn a_group_the_simulated_cloud_does_not_hold_is_an_error_naming_the_pool() {
    let cloud = SimCloud::new(7, FaultProfile::default(), 1.0);
    let c = cluster();
    let err = rota::sim::onboard::cluster_pools(&cloud, &c)
        .await
        .unwrap_err();
    assert!(err.message.contains("pool general"), "{err}");
}

/// `--karpenter`: a simulated cluster's Karpenter NodePool, read through the simulated API
/// server (which serves Karpenter's published CRDs), written as a `karpenterNodePool` pool
/// that validates against the example fleet and resolves to the very NodePool and the label
/// Karpenter puts on its nodes; a second import writes the same bytes.
#[tokio::test(start_paused = true)]
async fn an_imported_karpenter_node_pool_validates_and_resolves_to_its_node_pool() {
    use rota::sim::scenario::{Scenario, WorkloadProfile};
    use rota::sim::world::Fleet;
    use rota_core::onboard::FoundCloud;

    let group = GroupRef::Managed(ManagedGroup::KarpenterNodePool {
        region: "us-east-1".into(),
        eks_cluster: "sim-kpt".into(),
        node_pool: "general".into(),
    });
    let selector = BTreeMap::from([("karpenter.sh/nodepool".to_string(), "general".to_string())]);
    let scenario = Scenario {
        clusters: vec![ClusterScenario {
            name: "sim-kpt".into(),
            cloud: Cloud::Aws,
            pools: vec![PoolScenario {
                name: "general".into(),
                group: group.clone(),
                image: AMI.into(),
                node_selector: selector.clone(),
                nodes: 2,
            }],
        }],
        workloads: WorkloadProfile::from_yaml("nodes: {perPool: 2}", "workloads").unwrap(),
        faults: FaultProfile::default(),
        seed: 3,
    };
    let fleet = Fleet::start(&scenario, 1.0).await.unwrap();
    let client = rota::kube::sim::client(fleet.store("sim-kpt").unwrap().clone());
    tokio::time::sleep(std::time::Duration::from_secs(60)).await;
    let found = || async {
        FoundCluster {
            name: "sim-kpt".into(),
            labels: BTreeMap::from([("ring".into(), "early".into())]),
            cloud: FoundCloud {
                cloud: "aws",
                fields: vec![("region", "us-east-1".into())],
            },
            channel: "general".into(),
            pools: rota::kube::karpenter_import::list_node_pools(&client)
                .await
                .unwrap(),
            read_only: true,
            command: "rota clusters import sim-kpt --cloud aws --karpenter".into(),
        }
    };
    let f = found().await;
    assert_eq!(f.pools.len(), 1, "{:?}", f.pools);
    let repo = tempfile::tempdir().unwrap();
    crate::support::example_repo::copy_to(repo.path());
    let Outcome::New { text } = outcome("clusters/sim-kpt.yaml", None, &f).unwrap() else {
        panic!("no file yet")
    };
    std::fs::write(repo.path().join("clusters/sim-kpt.yaml"), &text).unwrap();
    assert!(
        text.contains("# Karpenter NodePool general (EC2NodeClass"),
        "{text}"
    );
    assert!(text.contains("karpenterNodePool: general"), "{text}");
    let fleet_repo = rota::fleet::load_dir(repo.path())
        .unwrap_or_else(|d| panic!("the imported file does not validate:\n{d}\n{text}"));
    let desired = fleet_repo.resolve_cluster("sim-kpt").unwrap();
    let got: Vec<_> = desired
        .pools
        .iter()
        .map(|p| (p.group.clone(), p.node_selector.clone()))
        .collect();
    assert_eq!(got, vec![(group, selector)], "{text}");
    assert_eq!(
        outcome("clusters/sim-kpt.yaml", Some(&text), &found().await).unwrap(),
        Outcome::Unchanged
    );
}
