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
